package kafka

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lovoo/goka/storage"
	"github.com/syndtr/goleveldb/leveldb"
	ldbiter "github.com/syndtr/goleveldb/leveldb/iterator"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"

	"msgx/internal/clock"
)

// The values of Config.TableStorage (MSGX_TABLE_STORAGE).
const (
	TableMemory = "memory"
	TableDisk   = "disk"
)

// Tables builds the storage of the processors' goka tables that
// Config.TableStorage names: MemoryStorage, or TableStorage under
// dir/goka with the LevelDB options opts.
func (c Config) Tables(dir string, opts *opt.Options) storage.Builder {
	if c.TableStorage == TableDisk {
		return TableStorage(filepath.Join(dir, "goka"), opts)
	}
	return MemoryStorage()
}

// TableStorage builds the local storage of the processors' goka tables:
// LevelDB under dir (one database per table partition, where goka's own
// LevelDB storage keeps it, with the same layout and offset key, so that
// either reads the other's), opened with opts, whose writes are gathered
// into batches.
//
// goka's storage writes every value, deletion and table offset with a
// LevelDB Put of its own, each a write to LevelDB's journal: with a table
// written at every transition that was a tenth of the flights processor's
// CPU. Here writes go into a batch that is written to LevelDB — values,
// deletions and the newest offset together, atomically — when it holds
// tableBatchWrites of them, every tableBatchPeriod, before an iteration, when
// the table is recovered and when it closes. Reads see the batch first.
//
// A crash loses the batch not written yet, offset included: the storage is
// then as it was at its last write, a state goka's own storage also
// passes through, and goka reads the table's changelog from the offset it
// holds to catch up, as after any restart. (Values are set before their
// changelog records are acknowledged, so a write may be ahead of the
// offset written with it — as with goka's storage, which writes each value
// at once and the offset when the record is acknowledged.)
func TableStorage(dir string, opts *opt.Options) storage.Builder {
	return func(topic string, partition int32) (storage.Storage, error) {
		path := filepath.Join(dir, fmt.Sprintf("%s.%d", topic, partition))
		db, err := leveldb.OpenFile(path, opts)
		if err != nil {
			return nil, fmt.Errorf("opening the local storage of table %s/%d: %w", topic, partition, err)
		}
		return newBatchedStorage(db, tableBatchWrites, tableBatchPeriod, clock.Real{}), nil
	}
}

const (
	// tableBatchWrites is how many writes a batch holds at most.
	tableBatchWrites = 512
	// tableBatchPeriod is how long a write waits in the batch at most.
	tableBatchPeriod = 100 * time.Millisecond
	// offsetKey is where goka's LevelDB storage keeps the table offset.
	offsetKey = "__offset"
)

// batchedStorage is TableStorage's storage of one table partition.
type batchedStorage struct {
	db     *leveldb.DB
	max    int
	period time.Duration
	clock  clock.Clock

	mu sync.Mutex
	// batch holds the writes not in LevelDB yet; pending the same by key
	// (a deletion as deleted), for reads.
	batch   leveldb.Batch
	pending map[string]pendingValue
	// offset is the newest table offset given, if offsetKnown (since
	// opening); offsetDirty says it is not in LevelDB yet.
	offset                   int64
	offsetKnown, offsetDirty bool
	err                      error // the last failed write, returned by the next ones

	stop, stopped chan struct{}
	closeOnce     sync.Once
}

type pendingValue struct {
	value   []byte
	deleted bool
}

func newBatchedStorage(db *leveldb.DB, max int, period time.Duration, clk clock.Clock) *batchedStorage {
	return &batchedStorage{db: db, max: max, period: period, clock: clk, pending: map[string]pendingValue{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// Open starts the periodic write of the batch.
func (s *batchedStorage) Open() error {
	go func() {
		defer close(s.stopped)
		for {
			select {
			case <-s.stop:
				return
			case <-s.clock.After(s.period):
				s.mu.Lock()
				_ = s.flushLocked() // kept in s.err for the next write
				s.mu.Unlock()
			}
		}
	}()
	return nil
}

// Close writes the batch and closes LevelDB.
func (s *batchedStorage) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.stopped
		s.mu.Lock()
		err = s.flushLocked()
		s.mu.Unlock()
		err = errors.Join(err, s.db.Close())
	})
	return err
}

// flushLocked writes the batch and the offset, if any, to LevelDB in one
// atomic write.
func (s *batchedStorage) flushLocked() error {
	if s.batch.Len() == 0 && !s.offsetDirty {
		return s.err
	}
	if s.offsetDirty {
		s.batch.Put([]byte(offsetKey), strconv.AppendInt(nil, s.offset, 10))
	}
	if err := s.db.Write(&s.batch, nil); err != nil {
		s.err = fmt.Errorf("writing %d table entries to the local storage: %w", s.batch.Len(), err)
		return s.err
	}
	s.batch.Reset()
	clear(s.pending)
	s.offsetDirty, s.err = false, nil
	return nil
}

// Has reports whether key has a value.
func (s *batchedStorage) Has(key string) (bool, error) {
	s.mu.Lock()
	p, ok := s.pending[key]
	s.mu.Unlock()
	if ok {
		return !p.deleted, nil
	}
	return s.db.Has([]byte(key), nil)
}

// Get returns key's value, nil when it has none.
func (s *batchedStorage) Get(key string) ([]byte, error) {
	s.mu.Lock()
	p, ok := s.pending[key]
	s.mu.Unlock()
	if ok {
		return p.value, nil
	}
	v, err := s.db.Get([]byte(key), nil)
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s from the local storage: %w", key, err)
	}
	return v, nil
}

// Set gives key the value.
func (s *batchedStorage) Set(key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch.Put([]byte(key), value)
	s.pending[key] = pendingValue{value: value}
	return s.writeIfFullLocked()
}

// Delete removes key's value.
func (s *batchedStorage) Delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch.Delete([]byte(key))
	s.pending[key] = pendingValue{deleted: true}
	return s.writeIfFullLocked()
}

func (s *batchedStorage) writeIfFullLocked() error {
	if s.batch.Len() >= s.max {
		return s.flushLocked()
	}
	return s.err
}

// GetOffset returns the table offset, def when none was ever stored.
func (s *batchedStorage) GetOffset(def int64) (int64, error) {
	s.mu.Lock()
	offset, known := s.offset, s.offsetKnown
	s.mu.Unlock()
	if known {
		return offset, nil
	}
	v, err := s.db.Get([]byte(offsetKey), nil)
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
		return def, nil
	case err != nil:
		return 0, fmt.Errorf("reading the table offset from the local storage: %w", err)
	}
	o, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("decoding the table offset %q of the local storage: %w", v, err)
	}
	return o, nil
}

// SetOffset records the table offset, written with the batch.
func (s *batchedStorage) SetOffset(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset, s.offsetKnown, s.offsetDirty = offset, true, true
	return s.err
}

// MarkRecovered writes what the recovery left in the batch.
func (s *batchedStorage) MarkRecovered() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

// Iterator iterates over every value, the batch written first.
func (s *batchedStorage) Iterator() (storage.Iterator, error) {
	return s.iterator(nil, &opt.ReadOptions{DontFillCache: true})
}

// IteratorWithRange iterates over the keys in [start, limit), or with the
// prefix start when limit is empty, the batch written first.
func (s *batchedStorage) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	if len(limit) > 0 {
		return s.iterator(&util.Range{Start: start, Limit: limit}, nil)
	}
	return s.iterator(util.BytesPrefix(start), nil)
}

func (s *batchedStorage) iterator(r *util.Range, ro *opt.ReadOptions) (storage.Iterator, error) {
	s.mu.Lock()
	err := s.flushLocked()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &tableIterator{it: s.db.NewIterator(r, ro)}, nil
}

// tableIterator skips the offset key, as goka's LevelDB iterator does.
type tableIterator struct{ it ldbiter.Iterator }

func (i *tableIterator) Next() bool {
	next := i.it.Next()
	if next && string(i.it.Key()) == offsetKey {
		next = i.it.Next()
	}
	return next
}

func (i *tableIterator) Err() error             { return i.it.Error() }
func (i *tableIterator) Key() []byte            { return i.it.Key() }
func (i *tableIterator) Value() ([]byte, error) { return i.it.Value(), nil }
func (i *tableIterator) Release()               { i.it.Release() }
func (i *tableIterator) Seek(key []byte) bool   { return i.it.Seek(key) }

// MemoryStorage builds table storage held in memory only: nothing is on
// disk, and goka recovers each table partition from its changelog when the
// processor starts. Unlike goka's storage.MemoryBuilder, it keeps no sorted
// list of keys (which goka re-sorts at every new key, and moves at every
// deletion: minutes of CPU for a table of 100,000 flights); an iteration
// sorts the keys it takes.
func MemoryStorage() storage.Builder {
	return func(string, int32) (storage.Storage, error) { return &memoryStorage{values: map[string][]byte{}}, nil }
}

type memoryStorage struct {
	mu     sync.RWMutex
	values map[string][]byte
	offset int64
	known  bool
}

func (*memoryStorage) Open() error          { return nil }
func (*memoryStorage) Close() error         { return nil }
func (*memoryStorage) MarkRecovered() error { return nil }

func (m *memoryStorage) Has(key string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.values[key]
	return ok, nil
}

func (m *memoryStorage) Get(key string) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.values[key], nil
}

func (m *memoryStorage) Set(key string, value []byte) error {
	if value == nil {
		return errors.New("table storage: cannot set a nil value")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[key] = value
	return nil
}

func (m *memoryStorage) Delete(key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.values, key)
	return nil
}

func (m *memoryStorage) GetOffset(def int64) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.known {
		return def, nil
	}
	return m.offset, nil
}

func (m *memoryStorage) SetOffset(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.offset, m.known = offset, true
	return nil
}

// Iterator iterates over a snapshot of the values in key order.
func (m *memoryStorage) Iterator() (storage.Iterator, error) {
	return m.snapshot(func(string) bool { return true }), nil
}

// IteratorWithRange iterates over a snapshot of the keys in [start, limit),
// or with the prefix start when limit is empty, in key order.
func (m *memoryStorage) IteratorWithRange(start, limit []byte) (storage.Iterator, error) {
	r := util.BytesPrefix(start)
	if len(limit) > 0 {
		r = &util.Range{Start: start, Limit: limit}
	}
	return m.snapshot(func(k string) bool {
		return k >= string(r.Start) && (r.Limit == nil || k < string(r.Limit))
	}), nil
}

func (m *memoryStorage) snapshot(in func(string) bool) *memoryIterator {
	m.mu.RLock()
	defer m.mu.RUnlock()
	it := &memoryIterator{i: -1, values: make(map[string][]byte)}
	for k, v := range m.values {
		if in(k) {
			it.keys = append(it.keys, k)
			it.values[k] = v
		}
	}
	slices.Sort(it.keys)
	return it
}

type memoryIterator struct {
	i      int
	keys   []string
	values map[string][]byte
}

func (it *memoryIterator) Next() bool {
	it.i++
	return it.i < len(it.keys)
}

func (it *memoryIterator) Err() error { return nil }

func (it *memoryIterator) Key() []byte {
	if it.i < 0 || it.i >= len(it.keys) {
		return nil
	}
	return []byte(it.keys[it.i])
}

func (it *memoryIterator) Value() ([]byte, error) {
	if it.i < 0 || it.i >= len(it.keys) {
		return nil, nil
	}
	return it.values[it.keys[it.i]], nil
}

func (it *memoryIterator) Release() { it.i = len(it.keys) }

// Seek moves to the first key at or after key.
func (it *memoryIterator) Seek(key []byte) bool {
	it.i = max(it.i, 0)
	for it.i < len(it.keys) && it.keys[it.i] < string(key) {
		it.i++
	}
	return it.i < len(it.keys)
}
