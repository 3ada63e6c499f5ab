package kafka

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb"

	"msgx/internal/clock"
)

func openTable(t *testing.T, dir string, max int) *batchedStorage {
	t.Helper()
	db, err := leveldb.OpenFile(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newBatchedStorage(db, max, time.Hour, clock.NewFake(time.Unix(0, 0)))
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	return s
}

func mustGet(t *testing.T, s storage.Storage, key string) string {
	t.Helper()
	v, err := s.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if v == nil {
		return "<none>"
	}
	return string(v)
}

// Reads see the batch; a clean close writes it, offset included.
func TestTableStorageReadsTheBatchAndWritesItOnClose(t *testing.T) {
	dir := t.TempDir()
	s := openTable(t, dir, 100)
	for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}, {"a", "3"}} {
		if err := s.Set(kv[0], []byte(kv[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOffset(41); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "a") + mustGet(t, s, "b"); got != "3<none>" {
		t.Fatalf("before the write: a, b = %s", got)
	}
	if has, _ := s.Has("b"); has {
		t.Fatal("a deleted key is there")
	}
	if _, err := s.db.Get([]byte("a"), nil); err == nil {
		t.Fatal("the batch was written before it filled up")
	}
	if o, _ := s.GetOffset(-1); o != 41 {
		t.Fatalf("offset %d", o)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTable(t, dir, 100)
	defer s.Close()
	if got := mustGet(t, s, "a") + mustGet(t, s, "b"); got != "3<none>" {
		t.Fatalf("after reopening: a, b = %s", got)
	}
	if o, _ := s.GetOffset(-1); o != 41 {
		t.Fatalf("offset after reopening %d", o)
	}
}

// A crash loses the batch not written yet with its offset: what is left is
// the last batch written, values and offset alike.
func TestTableStorageCrashKeepsValuesAndOffsetTogether(t *testing.T) {
	dir := t.TempDir()
	s := openTable(t, dir, 4)
	for i := range 10 {
		if err := s.Set(fmt.Sprint("k", i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOffset(int64(100 + i)); err != nil {
			t.Fatal(err)
		}
	}
	// Ten writes in batches of four: two written (k0…k7), the third
	// pending. A kill: LevelDB closed without the batch.
	close(s.stop)
	<-s.stopped
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTable(t, dir, 4)
	defer s.Close()
	// The eighth write filled the second batch: the offset given before
	// it (the seventh's, 106) went with it.
	if o, _ := s.GetOffset(-1); o != 106 {
		t.Fatalf("offset after the crash %d, want 106", o)
	}
	for i := range 10 {
		want := fmt.Sprint(i)
		if i >= 8 {
			want = "<none>"
		}
		if got := mustGet(t, s, fmt.Sprint("k", i)); got != want {
			t.Fatalf("k%d = %s after the crash, want %s", i, got, want)
		}
	}
}

// The storage reads what goka's own LevelDB storage wrote, and goka's
// reads what it writes: an upgrade or a downgrade keeps the local tables.
func TestTableStorageIsGokasLayout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "msgx-flights-table.0")
	g, err := storage.BuilderWithOptions(dir, nil)("msgx-flights-table", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Open(); err != nil {
		t.Fatal(err)
	}
	if err := g.MarkRecovered(); err != nil {
		t.Fatal(err)
	}
	if err := g.Set("goka", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := g.SetOffset(7); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := TableStorage(dir, nil)("msgx-flights-table", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "goka"); got != "1" {
		t.Fatalf("goka's value: %s", got)
	}
	if o, _ := s.GetOffset(-1); o != 7 {
		t.Fatalf("goka's offset: %d", o)
	}
	if err := s.Set("batched", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOffset(8); err != nil {
		t.Fatal(err)
	}
	// The iterator writes the batch first and skips the offset.
	it, err := s.Iterator()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for it.Next() {
		keys = append(keys, string(it.Key()))
	}
	it.Release()
	if fmt.Sprint(keys) != "[batched goka]" {
		t.Fatalf("iterated %v", keys)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := leveldb.OpenFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, _ = storage.New(db)
	defer g.Close()
	if got := mustGet(t, g, "batched"); got != "2" {
		t.Fatalf("goka reads %s", got)
	}
	if o, _ := g.GetOffset(-1); o != 8 {
		t.Fatalf("goka reads offset %d", o)
	}
}

// The periodic write empties the batch; offsets come from the producer's
// goroutine while the callback writes values (run with -race).
func TestTableStoragePeriodicWriteAndConcurrentOffsets(t *testing.T) {
	db, err := leveldb.OpenFile(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(0, 0))
	s := newBatchedStorage(db, 1<<20, time.Second, clk)
	if err := s.Open(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 500 {
			if err := s.Set(fmt.Sprint(i%50), []byte(fmt.Sprint(i))); err != nil {
				t.Error(err)
				return
			}
			if got := mustGet(t, s, fmt.Sprint(i%50)); got != fmt.Sprint(i) {
				t.Errorf("read %s after writing %d", got, i)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 500 {
			if err := s.SetOffset(int64(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if _, err := s.db.Get([]byte(offsetKey), nil); err == nil {
		t.Fatal("written before its period")
	}
	// The writer waits for its period; once it has passed and the writer
	// waits for the next one, the batch is in LevelDB.
	ctx := context.Background()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	v, err := s.db.Get([]byte(offsetKey), nil)
	if err != nil || string(v) != "499" {
		t.Fatalf("offset after the period %q, %v", v, err)
	}
	if v, err := s.db.Get([]byte("49"), nil); err != nil || string(v) != "499" {
		t.Fatalf("value after the period %q, %v", v, err)
	}
}

// Both table storages answer goka alike: values, deletions, the offset,
// iteration in key order (the offset key never shown), ranges and Seek.
func TestTableStoragesAnswerAlike(t *testing.T) {
	for name, build := range map[string]storage.Builder{
		"memory": MemoryStorage(),
		"disk":   TableStorage(t.TempDir(), nil),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := build("msgx-flights-table", 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Open(); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if o, err := s.GetOffset(-1); err != nil || o != -1 {
				t.Fatalf("offset of an empty storage %d, %v", o, err)
			}
			for _, k := range []string{"20", "10", "31", "30", "4"} {
				if err := s.Set(k, []byte("v"+k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete("31"); err != nil {
				t.Fatal(err)
			}
			if err := s.SetOffset(0); err != nil {
				t.Fatal(err)
			}
			if o, err := s.GetOffset(-1); err != nil || o != 0 {
				t.Fatalf("offset %d, %v", o, err)
			}
			if has, _ := s.Has("31"); has {
				t.Fatal("a deleted key is there")
			}
			if got := mustGet(t, s, "30") + mustGet(t, s, "31"); got != "v30<none>" {
				t.Fatalf("30, 31 = %s", got)
			}
			collect := func(it storage.Iterator, err error) string {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				defer it.Release()
				var out []string
				for it.Next() {
					v, err := it.Value()
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, string(it.Key())+"="+string(v))
				}
				return fmt.Sprint(out)
			}
			if got := collect(s.Iterator()); got != "[10=v10 20=v20 30=v30 4=v4]" {
				t.Fatalf("iterated %s", got)
			}
			if got := collect(s.IteratorWithRange([]byte("2"), []byte("4"))); got != "[20=v20 30=v30]" {
				t.Fatalf("range iterated %s", got)
			}
			if got := collect(s.IteratorWithRange([]byte("3"), nil)); got != "[30=v30]" {
				t.Fatalf("prefix iterated %s", got)
			}
			it, _ := s.Iterator()
			if !it.Seek([]byte("25")) || string(it.Key()) != "30" {
				t.Fatalf("Seek(25) at %q", it.Key())
			}
			it.Release()
		})
	}
}
