package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileWatch wraps a sink's write and fsync: it knows where each record's
// line ends in the file and how much of the file an fsync that returned
// covered (what was written before the fsync started), so that an answer can
// be checked against durability.
type fileWatch struct {
	mu      sync.Mutex
	written int64            // bytes written so far
	durable int64            // bytes covered by a completed fsync
	ends    map[string]int64 // record id -> end of its first line
	writes  chan struct{}    // a signal per write (while there is room)
	syncs   int
	// syncHook, when set, runs inside fsync n (from 1), before the file's
	// own; its error replaces the fsync's.
	syncHook func(n int) error
}

func watch(s *Sink) *fileWatch {
	w := &fileWatch{ends: map[string]int64{}, writes: make(chan struct{}, 1024)}
	write, fsync := s.write, s.sync
	s.write = func(b []byte) (int, error) {
		n, err := write(b)
		w.mu.Lock()
		for _, line := range bytes.SplitAfter(b[:n], []byte("\n")) {
			w.written += int64(len(line))
			if id, ok := lineID(line); ok {
				if _, seen := w.ends[id]; !seen {
					w.ends[id] = w.written
				}
			}
		}
		w.mu.Unlock()
		select {
		case w.writes <- struct{}{}:
		default:
		}
		return n, err
	}
	s.sync = func() error {
		w.mu.Lock()
		w.syncs++
		n, covered := w.syncs, w.written
		w.mu.Unlock()
		var err error
		if w.syncHook != nil {
			err = w.syncHook(n)
		}
		if ferr := fsync(); err == nil {
			err = ferr
		}
		if err == nil {
			w.mu.Lock()
			w.durable = max(w.durable, covered)
			w.mu.Unlock()
		}
		return err
	}
	return w
}

// lineID returns the id a record line starts with.
func lineID(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"id":"`))
	if !ok {
		return "", false
	}
	id, _, ok := bytes.Cut(rest, []byte(`"`))
	return string(id), ok
}

// isDurable reports whether id's line is covered by a completed fsync.
func (w *fileWatch) isDurable(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	end, ok := w.ends[id]
	return ok && end <= w.durable
}

// TestAnswerFollowsFsync pins the sink's promise with commits and answers
// overlapping: a record is answered as stored only once an fsync that
// started after its line was written has returned. The first record's answer
// is held until the second record's fsync has started, so that a batch is
// committed while an earlier one is still being answered; then many writers
// race.
func TestAnswerFollowsFsync(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.jsonl"), SyncFsync)
	w := watch(s)
	second := make(chan struct{})
	w.syncHook = func(n int) error {
		if n == 2 {
			close(second)
		}
		return nil
	}
	var mu sync.Mutex
	var early []string
	answered := make(chan error, 4096)
	submit := func(r *Record, hold chan struct{}) {
		require.NoError(t, s.Submit(t.Context(), r, func(_ Result, err error) {
			if err == nil && !w.isDurable(r.ID) {
				mu.Lock()
				early = append(early, r.ID)
				mu.Unlock()
			}
			if hold != nil {
				<-hold
			}
			answered <- err
		}))
	}
	submit(rec("a", 1), second)
	<-w.writes
	submit(rec("b", 1), nil) // committed while a's answer waits
	require.NoError(t, <-answered)
	require.NoError(t, <-answered)

	var wg sync.WaitGroup
	const writers, each = 16, 100
	for d := range writers {
		wg.Go(func() {
			for i := range each {
				submit(rec(fmt.Sprintf("w%d", d), uint64(i%60)), nil) // with redeliveries
			}
		})
	}
	wg.Wait()
	for range writers * each {
		require.NoError(t, <-answered)
	}
	require.NoError(t, s.Close())
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, early, "answered before an fsync covered them")
	st := s.Stats()
	assert.EqualValues(t, 2+writers*60, st.Records)
	assert.EqualValues(t, writers*(each-60), st.Duplicates)
	assert.Equal(t, st.Batches, st.Syncs, "an fsync per batch")
	t.Logf("%d records, %d writes, %d fsyncs", st.Records, st.Batches, st.Syncs)
}

// TestFsyncFailureIsNeverAcknowledged: when an fsync fails, neither the
// record it covered nor a redelivery of that record that arrived meanwhile
// (which the index knows as written) is answered as stored, nor is anything
// after.
func TestFsyncFailureIsNeverAcknowledged(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.jsonl"), SyncFsync)
	w := watch(s)
	release := make(chan struct{})
	w.syncHook = func(n int) error {
		if n == 1 {
			<-release
			return errors.New("EIO")
		}
		return nil
	}
	answered := make(chan error, 2)
	done := func(_ Result, err error) { answered <- err }
	require.NoError(t, s.Submit(t.Context(), rec("a", 1), done))
	<-w.writes
	require.NoError(t, s.Submit(t.Context(), rec("a", 1), done)) // queued while a's fsync runs
	close(release)
	assert.ErrorIs(t, <-answered, ErrFailed, "the record the failed fsync covered")
	assert.ErrorIs(t, <-answered, ErrFailed, "its redelivery")
	_, err := s.Append(context.Background(), rec("c", 1))
	assert.ErrorIs(t, err, ErrFailed, "a record after the failure")
	assert.ErrorIs(t, s.Healthy(), ErrFailed)
	assert.ErrorIs(t, s.Close(), ErrFailed)
	assert.Zero(t, s.Stats().Records, "no record counted as stored")
}

// TestFailedFsyncIsCutFromTheFile pins fsyncgate across a restart: the
// lines a failed fsync covered are cut from the file. They were never
// acknowledged, and after the failure the kernel may have dropped their
// pages while a reader still sees them: a sink opened on the file again (the
// gateway restarted on the same machine) would otherwise take the device's
// redelivery for a duplicate of a copy that is not on disk, and acknowledge it
// without writing it.
func TestFailedFsyncIsCutFromTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	s := open(t, path, SyncFsync)
	_, err := s.Append(t.Context(), rec("a", 1))
	require.NoError(t, err)
	w := watch(s)
	w.syncHook = func(int) error { return errors.New("EIO") }
	_, err = s.Append(t.Context(), rec("a", 2))
	require.ErrorIs(t, err, ErrFailed)
	require.ErrorIs(t, s.Close(), ErrFailed)

	s = open(t, path, SyncFsync)
	defer s.Close()
	assert.EqualValues(t, 1, s.Stats().Existing, "only the record whose fsync succeeded is in the file")
	r, err := s.Append(t.Context(), rec("a", 2))
	require.NoError(t, err)
	assert.False(t, r.Duplicate, "the redelivery of the record whose fsync failed was not written")
}

// TestOpenSyncsWhatItFinds: the file may hold lines that were written and
// never synced (the last process was killed between a write and its fsync,
// and never acknowledged them). Open syncs the file before a redelivery of
// such a record is answered as a duplicate: otherwise that acknowledgement
// would rest on a copy that a power loss soon after the restart still takes
// away.
func TestOpenSyncsWhatItFinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	line, err := rec("a", 1).AppendJSON(nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(line, '\n'), 0o644)) // written, not synced
	var w *fileWatch
	s, err := openWith(Config{Path: path}, func(s *Sink) { w = watch(s) })
	require.NoError(t, err)
	defer s.Close()
	synced := make(chan int, 1)
	require.NoError(t, s.Submit(t.Context(), rec("a", 1), func(r Result, err error) {
		assert.NoError(t, err)
		assert.True(t, r.Duplicate)
		w.mu.Lock()
		synced <- w.syncs
		w.mu.Unlock()
	}))
	assert.Positive(t, <-synced, "fsyncs before the duplicate was answered")
}

// TestSubmitAllocs: a record costs the sink no allocation of its own on its
// way to the file (a request and its line buffer are reused once answered).
func TestSubmitAllocs(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "sink.jsonl"), SyncWrite)
	defer s.Close()
	r := rec("d1", 0)
	answered := make(chan error, 1)
	done := func(_ Result, err error) { answered <- err }
	allocs := testing.AllocsPerRun(200, func() {
		r.Seq++
		require.NoError(t, s.Submit(t.Context(), r, done))
		require.NoError(t, <-answered)
	})
	assert.Zero(t, allocs)
}

// BenchmarkSubmit is the sink's cost per record on the submitting and
// committing goroutines, without the disk's (SyncWrite to a file in the
// test's directory).
func BenchmarkSubmit(b *testing.B) {
	s, err := Open(Config{Path: filepath.Join(b.TempDir(), "sink.jsonl"), Sync: SyncWrite})
	require.NoError(b, err)
	defer s.Close()
	r := rec("d1", 0)
	var wg sync.WaitGroup
	done := func(Result, error) { wg.Done() }
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		seq++
		r.Seq = seq
		wg.Add(1)
		if err := s.Submit(b.Context(), r, done); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}
