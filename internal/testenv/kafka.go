package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaOptions says which Apache Kafka StartKafka starts.
type KafkaOptions struct {
	// Nodes is how many nodes, each broker and controller of one KRaft
	// quorum: 1 (the default) or 3. Three nodes create topics with
	// default.replication.factor=3 and min.insync.replicas=2; unclean
	// leader election is off on both.
	Nodes int
	// Dir holds each node's server.properties, data and server.log. Empty:
	// a new temporary directory, removed by Close.
	Dir string
	// ClientPorts are the nodes' plaintext client ports (make kafka: 19092,
	// 19093, 19094); nil picks free ports. The other listeners (SASL_SSL,
	// broker-to-broker, controller) take the ports 100, 200 and 300 above.
	ClientPorts []int
	// Proxies advertises each node's plaintext client listener behind a
	// Proxy, so that a test can cut msgx off one broker while it stays in
	// the cluster (KafkaNode.Cut). Broker-to-broker traffic never passes one.
	Proxies bool
	// HeapMB is each node's JVM heap in MiB (default 512).
	HeapMB int
	// Detach lets the nodes outlive this process (make kafka); otherwise
	// they are killed when it dies, however it dies.
	Detach bool
}

// Kafka is Apache Kafka, fetched from Maven Central by the project's own
// pom (internal/testenv/kafka/pom.xml) and run as JVM processes on
// 127.0.0.1: one node or a three-node cluster in KRaft mode. Tests reach
// it as production msgx would, and can kill -9, SIGSTOP/SIGCONT, stop and
// restart each node, or cut msgx off one (its proxy).
//
// Every node has four listeners:
//   - CLIENT (plaintext; Addrs): no authentication, the principal
//     User:ANONYMOUS, which is a super user: tests and the make targets
//     use it without credentials;
//   - SECURE (SASL_SSL with SCRAM-SHA-256/512, a certificate of CA;
//     SecureAddrs): users made with AddSCRAMUser, every request checked
//     by the StandardAuthorizer against the ACLs the test grants;
//   - INTERNAL (broker to broker) and CONTROLLER (the KRaft quorum).
type Kafka struct {
	// ClusterID is the KRaft cluster ID the storage was formatted with.
	ClusterID string
	// CA issued the SECURE listeners' certificate: clients trust CA.File.
	CA *CA
	// Nodes are the nodes, Nodes[i].ID = i+1.
	Nodes []*KafkaNode

	opts    KafkaOptions
	dir     string
	tempDir bool
	lib     string
}

// KafkaNode is one node (broker + controller) of a Kafka.
type KafkaNode struct {
	// ID is the node's node.id (1, 2, 3).
	ID int32
	// Dir holds its server.properties, data/ and server.log.
	Dir string
	// Proxy stands before its client listener (KafkaOptions.Proxies).
	Proxy *Proxy

	k                                  *Kafka
	client, secure, internal, controll int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// KafkaVersion is the Apache Kafka version the project's pom pins.
func KafkaVersion() (string, error) {
	b, err := os.ReadFile(pomPath())
	if err != nil {
		return "", fmt.Errorf("reading the Kafka pom: %w", err)
	}
	m := regexp.MustCompile(`<kafka\.version>([^<]+)</kafka\.version>`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s names no <kafka.version>", pomPath())
	}
	return string(m[1]), nil
}

func pomPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "kafka", "pom.xml")
}

// KafkaLib resolves Apache Kafka's jars from Maven Central once into
// ~/.cache/msgx/kafka-<version>/lib (mvn, the project's pom) and returns
// that directory. Concurrent callers (test packages run in parallel) wait
// for one resolution. A failure (no network, no mvn, a version Maven
// Central does not serve) is one error naming the cause: tests never fall
// back to the in-process fake.
func KafkaLib() (string, error) {
	version, err := KafkaVersion()
	if err != nil {
		return "", err
	}
	cache, err := installOnce("kafka-"+version, "Apache Kafka's jars", func(cache string) error {
		if _, err := exec.LookPath("mvn"); err != nil {
			return fmt.Errorf("resolving Apache Kafka %s: Maven (mvn) is not installed", version)
		}
		lib := filepath.Join(cache, "lib")
		_ = os.RemoveAll(lib)
		cmd := exec.Command("mvn", "-q", "-B", "-f", pomPath(), "dependency:copy-dependencies",
			"-DoutputDirectory="+lib, "-DincludeScope=runtime")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("resolving Apache Kafka %s from Maven Central failed (mvn -f %s dependency:copy-dependencies): %v: %s",
				version, pomPath(), err, lastLines(out, 3))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "lib"), nil
}

// lastLines is the last n non-empty lines of out, joined by " | ".
func lastLines(out []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// StartKafka formats the nodes' storage (unless Dir holds a formatted one
// already), starts them and waits until every broker is registered and
// answers.
//
// With free ports (no ClientPorts) a node that exits at start — most
// likely because another process took one of its ports between their
// choice and the JVM's bind — is retried on new ports, twice.
func StartKafka(o KafkaOptions) (*Kafka, error) {
	for attempt := 1; ; attempt++ {
		k, err := startKafka(o)
		var exited *nodeExitedError
		if err == nil || o.ClientPorts != nil || o.Dir != "" || attempt == 3 || !errors.As(err, &exited) {
			return k, err
		}
	}
}

// nodeExitedError is a node's JVM that exited while the cluster started.
type nodeExitedError struct {
	id   int32
	tail string
}

func (e *nodeExitedError) Error() string {
	return fmt.Sprintf("Kafka node %d exited: %s", e.id, e.tail)
}

func startKafka(o KafkaOptions) (*Kafka, error) {
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes != 1 && o.Nodes != 3 {
		return nil, fmt.Errorf("a Kafka of %d nodes: want 1 or 3", o.Nodes)
	}
	if o.HeapMB == 0 {
		o.HeapMB = 512
	}
	if o.ClientPorts != nil && len(o.ClientPorts) != o.Nodes {
		return nil, fmt.Errorf("%d client ports for %d nodes", len(o.ClientPorts), o.Nodes)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, errors.New("starting Apache Kafka: java is not installed (Kafka 4 needs Java 17 or newer)")
	}
	lib, err := KafkaLib()
	if err != nil {
		return nil, err
	}
	k := &Kafka{opts: o, dir: o.Dir, lib: lib}
	if k.dir == "" {
		if k.dir, err = os.MkdirTemp("", "msgx-kafka-"); err != nil {
			return nil, err
		}
		k.tempDir = true
	}
	ok := false
	defer func() {
		if !ok {
			k.Close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(k.dir, "ca"), 0o755); err != nil {
		return nil, err
	}
	if k.CA, err = StartCA(filepath.Join(k.dir, "ca"), "msgx test Kafka CA"); err != nil {
		return nil, err
	}
	server, err := k.CA.Issue("kafka", x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	keystore := filepath.Join(k.dir, "ca", "kafka-keystore.pem")
	if err := concatFiles(keystore, server.PKCS8KeyFile, server.CertFile); err != nil {
		return nil, err
	}

	for i := 0; i < o.Nodes; i++ {
		n := &KafkaNode{ID: int32(i + 1), k: k, Dir: filepath.Join(k.dir, fmt.Sprintf("node-%d", i+1))}
		if o.ClientPorts != nil {
			p := o.ClientPorts[i]
			n.client, n.secure, n.internal, n.controll = p, p+100, p+200, p+300
		} else {
			ports, err := freePorts(4)
			if err != nil {
				return nil, err
			}
			n.client, n.secure, n.internal, n.controll = ports[0], ports[1], ports[2], ports[3]
		}
		if o.Proxies {
			if n.Proxy, err = StartProxy(n.listenAddr(n.client)); err != nil {
				return nil, err
			}
		}
		k.Nodes = append(k.Nodes, n)
	}

	// The storage is formatted once, with one cluster ID for every node;
	// a directory formatted before (make kafka after make kafka-stop)
	// keeps its ID, topics and offsets.
	k.ClusterID, err = readClusterID(k.Nodes[0].dataDir())
	if err != nil {
		return nil, err
	}
	format := k.ClusterID == ""
	if format {
		k.ClusterID = newKafkaUUID()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(k.Nodes))
	for i, n := range k.Nodes {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(n.propertiesFile(), []byte(n.properties(keystore)), 0o644); err != nil {
			return nil, err
		}
		if format {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.format()
			}()
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, n := range k.Nodes {
		if err := n.Start(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := k.WaitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return k, nil
}

// Addrs are the nodes' plaintext client addresses (their proxies' with
// KafkaOptions.Proxies), to bootstrap from.
func (k *Kafka) Addrs() []string {
	var out []string
	for _, n := range k.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// SecureAddrs are the nodes' SASL_SSL addresses.
func (k *Kafka) SecureAddrs() []string {
	var out []string
	for _, n := range k.Nodes {
		out = append(out, n.listenAddr(n.secure))
	}
	return out
}

// Lib is the directory of Apache Kafka's jars (java -cp Lib/*).
func (k *Kafka) Lib() string { return k.lib }

// Node returns the node with ID id.
func (k *Kafka) Node(id int32) *KafkaNode { return k.Nodes[id-1] }

// Close kills every node, closes the proxies and removes a temporary Dir.
// Detached nodes are left running.
func (k *Kafka) Close() {
	for _, n := range k.Nodes {
		if !k.opts.Detach {
			_ = n.Kill()
		}
		if n.Proxy != nil {
			n.Proxy.Down()
		}
	}
	if k.tempDir {
		_ = os.RemoveAll(k.dir)
	}
}

// WaitReady waits until every running node is registered and unfenced (in
// the metadata a client gets) and answers on its client listener.
func (k *Kafka) WaitReady(ctx context.Context) error {
	var want []int32
	for _, n := range k.Nodes {
		if n.Running() {
			want = append(want, n.ID)
		}
	}
	var last error
	for {
		last = k.checkBrokers(ctx, want)
		if last == nil {
			return nil
		}
		for _, n := range k.Nodes {
			if n.exitedEarly() {
				return &nodeExitedError{id: n.ID, tail: n.LogTail(5)}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("Kafka (%d nodes under %s) not ready: %w", len(k.Nodes), k.dir, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (k *Kafka) checkBrokers(ctx context.Context, want []int32) error {
	for _, id := range want {
		n := k.Node(id)
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.listenAddr(n.client)), kgo.DialTimeout(2*time.Second))
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		md, err := kadm.NewClient(cl).BrokerMetadata(cctx)
		cancel()
		cl.Close()
		if err != nil {
			return fmt.Errorf("node %d: %w", id, err)
		}
		seen := map[int32]bool{}
		for _, b := range md.Brokers {
			seen[b.NodeID] = true
		}
		for _, w := range want {
			if !seen[w] {
				return fmt.Errorf("node %d does not list broker %d yet", id, w)
			}
		}
	}
	return nil
}

// Admin is a franz-go client on the plaintext listeners (a super user).
func (k *Kafka) Admin() (*kadm.Client, func(), error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// AddSCRAMUser creates (or updates) a SCRAM user of mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512) for the SECURE listeners.
func (k *Kafka) AddSCRAMUser(ctx context.Context, mechanism, user, password string) error {
	adm, closeFn, err := k.Admin()
	if err != nil {
		return err
	}
	defer closeFn()
	mech := kadm.ScramSha256
	if mechanism == "SCRAM-SHA-512" {
		mech = kadm.ScramSha512
	}
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: mech, Iterations: 4096, Password: password}})
	if err != nil {
		return fmt.Errorf("creating SCRAM user %s: %w", user, err)
	}
	if err := res.Error(); err != nil {
		return fmt.Errorf("creating SCRAM user %s: %w", user, err)
	}
	// The credential travels through the metadata log to every broker:
	// wait until a login on each succeeds.
	for _, addr := range k.SecureAddrs() {
		for {
			err := k.tryLogin(ctx, addr, mechanism, user, password)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("SCRAM user %s cannot log in on %s: %w", user, addr, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// SCRAMOpts are the franz-go options of a client of the SECURE listeners:
// TLS trusting ca, SASL with mechanism as user.
func SCRAMOpts(ca *CA, mechanism, user, password string) []kgo.Opt {
	auth := scram.Auth{User: user, Pass: password}
	m := auth.AsSha256Mechanism()
	if mechanism == "SCRAM-SHA-512" {
		m = auth.AsSha512Mechanism()
	}
	return []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool}), kgo.SASL(m), kgo.DialTimeout(5 * time.Second)}
}

// Start starts the node's JVM (after Kill or Stop: a restart with its
// data). It does not wait for it to be ready (Kafka.WaitReady).
func (n *KafkaNode) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("Kafka node %d runs already", n.ID)
	}
	out, err := os.OpenFile(filepath.Join(n.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := n.k.java("kafka.Kafka", n.propertiesFile())
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if n.k.opts.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Killed with the test binary, even by a panic or a timeout.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting Kafka node %d: %w", n.ID, err)
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	n.cmd, n.paused = cmd, false
	n.exited = make(chan struct{})
	go func(c *exec.Cmd, exited chan struct{}) {
		_ = c.Wait()
		close(exited)
	}(cmd, n.exited)
	return nil
}

// Kill is kill -9 of the node's JVM; it returns once the process is gone.
func (n *KafkaNode) Kill() error { return n.signalAndWait(syscall.SIGKILL, 10*time.Second) }

// Stop is SIGTERM, Kafka's controlled shutdown (leaders moved away first);
// it waits up to two minutes, then kills.
func (n *KafkaNode) Stop() error {
	if err := n.signalAndWait(syscall.SIGTERM, 2*time.Minute); err != nil {
		return n.Kill()
	}
	return nil
}

func (n *KafkaNode) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	cmd, exited, paused := n.cmd, n.exited, n.paused
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		return fmt.Errorf("Kafka node %d did not exit on %v within %v", n.ID, sig, timeout)
	}
	n.mu.Lock()
	n.cmd, n.paused = nil, false
	n.mu.Unlock()
	return nil
}

// Pause is SIGSTOP: the JVM freezes (a long GC pause, a frozen VM) with its
// connections open.
func (n *KafkaNode) Pause() error { return n.signal(syscall.SIGSTOP, true) }

// Resume is SIGCONT after Pause.
func (n *KafkaNode) Resume() error { return n.signal(syscall.SIGCONT, false) }

func (n *KafkaNode) signal(sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("Kafka node %d is not running", n.ID)
	}
	n.paused = paused
	return n.cmd.Process.Signal(sig)
}

// Cut takes the node's client listener away from msgx (its proxy down)
// while the node stays in the cluster; Restore brings it back.
func (n *KafkaNode) Cut() { n.Proxy.Down() }

// Restore undoes Cut.
func (n *KafkaNode) Restore() error { return n.Proxy.TryUp() }

// Running reports whether the node's JVM was started and has not exited.
func (n *KafkaNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Pid is the process ID of the node's JVM, 0 when it does not run: a
// benchmark reads the broker's CPU time from /proc/<pid>/stat.
func (n *KafkaNode) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	select {
	case <-n.exited:
		return 0
	default:
		return n.cmd.Process.Pid
	}
}

func (n *KafkaNode) exitedEarly() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// Addr is the node's client address msgx uses (its proxy's, if any).
func (n *KafkaNode) Addr() string {
	if n.Proxy != nil {
		return n.Proxy.Addr()
	}
	return n.listenAddr(n.client)
}

// LogTail is the last lines of the node's server.log and stdout.
func (n *KafkaNode) LogTail(lines int) string {
	var out []string
	for _, f := range []string{"server.log", "stdout.log"} {
		b, _ := os.ReadFile(filepath.Join(n.Dir, f))
		out = append(out, f+": "+lastLines(b, lines))
	}
	return strings.Join(out, "\n")
}

func (n *KafkaNode) listenAddr(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
func (n *KafkaNode) dataDir() string        { return filepath.Join(n.Dir, "data") }
func (n *KafkaNode) propertiesFile() string { return filepath.Join(n.Dir, "server.properties") }

// properties is the node's server.properties.
func (n *KafkaNode) properties(keystore string) string {
	k := n.k
	var voters []string
	for _, m := range k.Nodes {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", m.ID, m.controll))
	}
	rf, minISR := 1, 1
	if len(k.Nodes) == 3 {
		rf, minISR = 3, 2
	}
	jaas := "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	lines := []string{
		"process.roles=broker,controller",
		fmt.Sprintf("node.id=%d", n.ID),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		fmt.Sprintf("listeners=CLIENT://127.0.0.1:%d,SECURE://127.0.0.1:%d,INTERNAL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d",
			n.client, n.secure, n.internal, n.controll),
		fmt.Sprintf("advertised.listeners=CLIENT://%s,SECURE://127.0.0.1:%d,INTERNAL://127.0.0.1:%d", n.Addr(), n.secure, n.internal),
		"listener.security.protocol.map=CLIENT:PLAINTEXT,SECURE:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name=INTERNAL",
		"controller.listener.names=CONTROLLER",
		"log.dirs=" + n.dataDir(),

		// What a production cluster has: replication and its minimum, no
		// unclean election, no topic created by a client's metadata
		// request (msgx creates every topic it uses).
		fmt.Sprintf("default.replication.factor=%d", rf),
		fmt.Sprintf("min.insync.replicas=%d", minISR),
		fmt.Sprintf("offsets.topic.replication.factor=%d", rf),
		fmt.Sprintf("transaction.state.log.replication.factor=%d", rf),
		fmt.Sprintf("transaction.state.log.min.isr=%d", minISR),
		"unclean.leader.election.enable=false",
		"auto.create.topics.enable=false",
		"num.partitions=1",
		// Test-sized: fewer coordinator partitions (quicker to load), no
		// initial rebalance delay, session timeouts from 1 s (the crash
		// tests' 3 s) like the embedded broker.
		"offsets.topic.num.partitions=10",
		"transaction.state.log.num.partitions=10",
		"group.initial.rebalance.delay.ms=0",
		"group.min.session.timeout.ms=1000",

		// Least privilege is enforced: every request on SECURE is checked
		// against ACLs; the plaintext listeners' User:ANONYMOUS (tests,
		// brokers, controllers) is a super user.
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS",
		"allow.everyone.if.no.acl.found=false",
		"listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.secure.scram-sha-256.sasl.jaas.config=" + jaas,
		"listener.name.secure.scram-sha-512.sasl.jaas.config=" + jaas,
		"listener.name.secure.ssl.keystore.type=PEM",
		"listener.name.secure.ssl.keystore.location=" + keystore,
	}
	return strings.Join(lines, "\n") + "\n"
}

// format is kafka-storage format of the node's data directory.
func (n *KafkaNode) format() error {
	cmd := n.k.java("kafka.tools.StorageTool", "format", "-t", n.k.ClusterID, "-c", n.propertiesFile(), "--ignore-formatted")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("formatting Kafka node %d's storage: %v: %s", n.ID, err, lastLines(out, 3))
	}
	return nil
}

// java is a JVM running class main of Apache Kafka's jars.
func (k *Kafka) java(main string, args ...string) *exec.Cmd {
	_, file, _, _ := runtime.Caller(0)
	log4j := filepath.Join(filepath.Dir(file), "kafka", "log4j2.properties")
	heap := strconv.Itoa(k.opts.HeapMB) + "m"
	logFile := filepath.Join(k.dir, "tools.log")
	if main == "kafka.Kafka" {
		logFile = filepath.Join(filepath.Dir(args[0]), "server.log")
	}
	jvm := []string{"-Xms" + heap, "-Xmx" + heap, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
		"-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + log4j, "-Dkafka.log.file=" + logFile}
	if main != "kafka.Kafka" {
		jvm = []string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j2.configurationFile=" + log4j, "-Dkafka.log.file=" + logFile}
	}
	return exec.Command("java", append(append(jvm, "-cp", filepath.Join(k.lib, "*"), main), args...)...)
}

// ConsoleConsume reads topic from its beginning with Apache Kafka's own
// console consumer (Java, org.apache.kafka.tools.consumer.ConsoleConsumer)
// on the plaintext listeners, read_committed or read_uncommitted, until it
// was idle for idle (the first poll, joining its group, included); it returns
// one "key\tvalue" line per record.
func (k *Kafka) ConsoleConsume(topic string, readCommitted bool, idle time.Duration) ([]string, error) {
	iso := "read_uncommitted"
	if readCommitted {
		iso = "read_committed"
	}
	cmd := k.java("org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", strings.Join(k.Addrs(), ","), "--topic", topic, "--from-beginning",
		"--isolation-level", iso, "--timeout-ms", strconv.FormatInt(idle.Milliseconds(), 10),
		"--formatter-property", "print.key=true", "--formatter-property", "key.separator=\t")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kafka console consumer of %s: %v: %s", topic, err, lastLines(stderr.Bytes(), 3))
	}
	var out []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

func (k *Kafka) tryLogin(ctx context.Context, addr, mechanism, user, password string) error {
	cl, err := kgo.NewClient(append(SCRAMOpts(k.CA, mechanism, user, password), kgo.SeedBrokers(addr))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(cctx)
	return err
}

// readClusterID is the cluster.id of a formatted data directory, "" when
// it is not formatted.
func readClusterID(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "meta.properties"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^cluster\.id=(\S+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s/meta.properties has no cluster.id", dataDir)
	}
	return string(m[1]), nil
}

// newKafkaUUID is a random Kafka Uuid in its text form (what kafka-storage
// random-uuid prints): 16 bytes, URL-safe base64 without padding — and,
// as Kafka's own Uuid.randomUuid, never starting with '-', which a
// command line would take for an option.
func newKafkaUUID() string {
	for {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		if s := base64.RawURLEncoding.EncodeToString(b); s[0] != '-' {
			return s
		}
	}
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func concatFiles(dst string, srcs ...string) error {
	var b []byte
	for _, s := range srcs {
		c, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		b = append(b, c...)
	}
	return os.WriteFile(dst, b, 0o600)
}

// Leaders returns the leader node of each partition of topic (-1: none).
func (k *Kafka) Leaders(ctx context.Context, topic string) ([]int32, error) {
	adm, done, err := k.Admin()
	if err != nil {
		return nil, err
	}
	defer done()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	t, ok := td[topic]
	if !ok || t.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, t.Err)
	}
	out := make([]int32, len(t.Partitions))
	for _, p := range t.Partitions {
		out[p.Partition] = p.Leader
	}
	return out, nil
}

// MostLeader is the node that leads most partitions of topic.
func (k *Kafka) MostLeader(ctx context.Context, topic string) (int32, error) {
	ls, err := k.Leaders(ctx, topic)
	if err != nil {
		return 0, err
	}
	count := map[int32]int{}
	best := int32(-1)
	for _, l := range ls {
		count[l]++
		if l >= 0 && (best < 0 || count[l] > count[best]) {
			best = l
		}
	}
	if best < 0 {
		return 0, fmt.Errorf("topic %s has no leader", topic)
	}
	return best, nil
}

// ActiveController is the node leading the KRaft quorum (the metadata log's
// leader).
func (k *Kafka) ActiveController(ctx context.Context) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, err
	}
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return 0, errors.New("DescribeQuorum answered no partition")
	}
	return resp.Topics[0].Partitions[0].LeaderID, nil
}

// Coordinator is the node coordinating the consumer group key (txn false)
// or the transactional ID key (txn true).
func (k *Kafka) Coordinator(ctx context.Context, key string, txn bool) (int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addrs()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{key}
	if txn {
		req.CoordinatorType = 1
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Coordinators) != 1 {
		return 0, errors.New("FindCoordinator answered no coordinator")
	}
	c := resp.Coordinators[0]
	if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
		return 0, fmt.Errorf("coordinator of %s: %w", key, err)
	}
	return c.NodeID, nil
}

// FullISR reports whether every partition of every topic has all its
// replicas in sync (after a node came back: it caught up).
func (k *Kafka) FullISR(ctx context.Context, topics ...string) (bool, error) {
	adm, done, err := k.Admin()
	if err != nil {
		return false, err
	}
	defer done()
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return false, err
	}
	for _, t := range td {
		if t.Err != nil {
			return false, t.Err
		}
		for _, p := range t.Partitions {
			if len(p.ISR) < len(p.Replicas) {
				return false, nil
			}
		}
	}
	return true, nil
}
