package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"msgx/internal/kafka"
	"msgx/internal/testenv"
)

// Without MSGX_KAFKA_INSTANCE_ID every instance gets its own static member
// ID, stable across its restarts: the host name and a hash of its state
// directory (two instances on one host need their own anyway). A set one is
// used as it is.
func TestDefaultInstanceIDPerStateDir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	id := func(extra map[string]string) string {
		t.Helper()
		environ := map[string]string{"MSGX_STATE_DIR": a}
		for k, v := range extra {
			environ[k] = v
		}
		cfg, err := loadConfig(environ)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Kafka.InstanceID
	}
	first := id(nil)
	if !strings.HasPrefix(first, "msgx-") || len(first) < len("msgx-x-12345678") {
		t.Fatalf("default instance ID %q", first)
	}
	if again := id(nil); again != first {
		t.Errorf("restart: %q, then %q", first, again)
	}
	if other := id(map[string]string{"MSGX_STATE_DIR": b}); other == first {
		t.Errorf("two state directories share the instance ID %q", first)
	}
	if rel := kafka.DefaultInstanceID(a + "/./"); rel != first {
		t.Errorf("the same directory spelt differently: %q, %q", rel, first)
	}
	if set := id(map[string]string{"MSGX_KAFKA_INSTANCE_ID": "gate-2"}); set != "gate-2" {
		t.Errorf("MSGX_KAFKA_INSTANCE_ID=gate-2 gives %q", set)
	}
}

// lockedBuffer is a log sink two goroutines may write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Two `msgx process` instances given the same MSGX_KAFKA_INSTANCE_ID: the
// broker fences the first out of its consumer groups when the second joins.
// The first stops, status 1, with one ERROR line naming the variable,
// instead of rejoining — which would fence the second in turn, for ever —
// while the second goes on.
func TestDuplicateInstanceIDStops(t *testing.T) {
	brokers := testenv.NewBroker(t)
	environ, _ := testEnviron(t, map[string]string{"MSGX_KAFKA_BROKERS": strings.Join(brokers, ","), "MSGX_KAFKA_INSTANCE_ID": "gate-1",
		"MSGX_HTTP_ADDR": freeAddr(t)})
	var errA lockedBuffer
	doneA := make(chan int, 1)
	go func() { doneA <- realMain([]string{"process"}, environ, io.Discard, &errA) }()
	if owners := waitForSharing(t, brokers, 1, time.Minute); owners["gate-1"] == nil {
		t.Fatalf("flights partitions %v, want them with gate-1", owners)
	}

	environ["MSGX_STATE_DIR"] = t.TempDir()
	environ["MSGX_HTTP_ADDR"] = freeAddr(t)
	cfgB, err := loadConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { doneB <- runGateway(ctx, cfgB, testenv.Logger(t), roleProcess) }()
	defer func() {
		cancel()
		<-doneB
	}()
	var code int
	select {
	case code = <-doneA:
	case err := <-doneB:
		t.Fatalf("the second instance stopped: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatalf("the fenced instance did not stop; its log:\n%s", errA.String())
	}
	var errorLines []string
	for _, l := range strings.Split(errA.String(), "\n") {
		if strings.Contains(l, `"level":"ERROR"`) {
			errorLines = append(errorLines, l)
		}
	}
	if code != 1 || len(errorLines) != 1 || !strings.Contains(errorLines[0], `MSGX_KAFKA_INSTANCE_ID=\"gate-1\"`) ||
		!strings.Contains(errorLines[0], "another msgx instance uses the same static member ID") {
		t.Errorf("the fenced instance: status %d, ERROR lines %q\nlog:\n%s", code, errorLines, errA.String())
	}
	// The second keeps its place and its work.
	if owners := waitForSharing(t, brokers, 1, time.Minute); owners["gate-1"] == nil {
		t.Errorf("flights partitions %v after the fence, want them with the second gate-1", owners)
	}
	select {
	case err := <-doneB:
		t.Fatalf("the second instance stopped too: %v", err)
	default:
	}
}
