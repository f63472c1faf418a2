// Package sink appends accepted telemetry to a durable JSON Lines file with
// group commit, so that the gateway acknowledges a message only once it is on
// disk, and recognises redelivered messages by their (device, seq) id.
//
// # Durability
//
// Append returns only after the record's line has been written and, under
// SyncFsync (the default), fsync'ed together with every other record that was
// waiting at the time: one write of whole lines and one fsync per batch
// (group commit). One goroutine commits; another answers, so that while the
// records of one batch are answered (each answer may start the write of an
// acknowledgement) the next batch is already being written and synced, and
// while one batch is being synced the next one collects: under load a batch
// grows to cover every publisher that is waiting and the cost of an fsync
// is shared. A write that fails part-way is cut
// back to the last complete line, and after any write or fsync failure the
// sink refuses every later record (Healthy reports the error): after a failed
// fsync the kernel may have dropped the dirty pages, so nothing written since
// the last good fsync can be trusted, and the gateway must stop acknowledging;
// the lines the failed fsync covered are cut off.
// At Open a torn last line (a crash in the middle of a write, never
// acknowledged) is cut off, and under SyncFsync the file is synced before
// anything is answered: it may hold lines the last process wrote and never
// synced, which a redelivery would otherwise find as duplicates. Open reads
// the file in bounded memory, whatever it holds: a line longer than
// MaxLineBytes is skipped, not buffered, and
// counted as corrupt when it is complete (Stats.Corrupt), as is any other
// complete line that is not a record; such lines are kept, never rewritten.
// Open refuses a path that is not a regular file (a device such as /dev/zero
// would be read for ever).
//
// # Duplicates
//
// A device that did not receive an acknowledgement (the connection broke
// after the record was written) sends the message again. The sink remembers
// the last DedupeWindow sequence numbers of each device it has seen, rebuilt
// from the file at Open, and does not write a record whose id is already
// written (it is then answered once that write is durable) or already in the
// batch: Append reports it as a duplicate, the gateway acknowledges it again
// and counts it. What the window cannot catch (a device whose sequence
// numbers jumped further than the window, or more devices than MaxDevices)
// is written again and found by Summarize, which counts duplicates by id
// when reading a file.
package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SyncMode says what "durable" means before Append returns.
type SyncMode uint8

const (
	// SyncFsync writes the batch and fsyncs the file: the record survives
	// a crash of the machine. The default.
	SyncFsync SyncMode = iota
	// SyncWrite writes the batch to the kernel without fsync: the record
	// survives a crash of the process, not of the machine.
	SyncWrite
)

// String returns "fsync" or "write".
func (m SyncMode) String() string {
	if m == SyncWrite {
		return "write"
	}
	return "fsync"
}

// MarshalText implements encoding.TextMarshaler with the names String
// returns.
func (m SyncMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: "fsync" or "write".
func (m *SyncMode) UnmarshalText(text []byte) error {
	switch string(text) {
	case "fsync":
		*m = SyncFsync
	case "write":
		*m = SyncWrite
	default:
		return fmt.Errorf("sink: sync mode %q: want fsync or write", text)
	}
	return nil
}

// Set implements flag.Value, as UnmarshalText.
func (m *SyncMode) Set(s string) error { return m.UnmarshalText([]byte(s)) }

// Defaults for zero Config fields.
const (
	DefaultMaxBatch     = 512
	DefaultDedupeWindow = 4096
	// DefaultMaxDevices bounds the duplicate index: at most
	// IndexBytesPerDevice each, a full index holds under 180 MiB.
	DefaultMaxDevices = 1 << 18
	// IndexBytesPerDevice bounds what one device costs in the duplicate
	// index at the default DedupeWindow with device names up to about 100
	// bytes (TestIndexBytesPerDevice measures about 610 with 23-byte names).
	IndexBytesPerDevice = 700
	DefaultMaxLineBytes = 1 << 20
	queueLen            = 4096
)

// Errors.
var (
	ErrClosed   = errors.New("sink: closed")
	ErrFailed   = errors.New("sink: failed; refusing records")
	ErrTooLarge = errors.New("sink: record longer than MaxLineBytes")
	ErrNotFile  = errors.New("sink: not a regular file")
)

// Config configures a Sink.
type Config struct {
	// Path is the JSON Lines file, created if missing and appended to.
	Path string
	// Sync is the durability of an acknowledged record. Zero is SyncFsync.
	Sync SyncMode
	// MaxBatch bounds the records written by one write call and covered by
	// one fsync. Zero means DefaultMaxBatch.
	MaxBatch int
	// DedupeWindow is how many of each device's most recent sequence numbers
	// are remembered, rounded up to a multiple of 64. Zero means
	// DefaultDedupeWindow.
	DedupeWindow int
	// MaxDevices bounds the devices remembered; beyond it an arbitrary device
	// is forgotten. Zero means DefaultMaxDevices.
	MaxDevices int
	// MaxLineBytes bounds one record's line: a longer record is refused
	// with ErrTooLarge, and Open skips longer lines without buffering them.
	// Zero means DefaultMaxLineBytes; LineBytesFor gives the bound for a
	// payload limit.
	MaxLineBytes int
	// OnCommit, when set, is called after each batch from the committing
	// goroutine, before its records are answered, with the number of records
	// written, the bytes, how long the write and fsync took, and the error
	// if any. It must not block.
	OnCommit func(records, bytes int, d time.Duration, err error)
}

// Result says what Append did with a record.
type Result struct {
	// Duplicate reports that a record with the same id was already durable
	// (or in the same batch), so this one was not written again.
	Duplicate bool
}

// Stats are a sink's counters.
type Stats struct {
	Records    uint64 // records written since Open
	Duplicates uint64 // records not written because their id was durable
	Batches    uint64 // write calls
	Syncs      uint64 // fsync calls (one per batch under SyncFsync)
	Bytes      uint64
	// Recovered counts what Open found: records already in the file, bytes
	// of a torn last line it cut off, and complete lines that are not
	// records (corrupt, or longer than MaxLineBytes), the first of which
	// starts at byte FirstCorruptAt.
	Existing       uint64
	TornBytes      int64
	Corrupt        uint64
	FirstCorruptAt int64
	// Queued is the number of records waiting for the committer now.
	Queued int
}

// LineBytesFor returns the MaxLineBytes that fits every record whose payload
// is at most maxPayload bytes: a payload can grow six times when encoded
// (json escapes <, > and & as \u003c), and the other fields (topic, client
// id, certificate subject) take up to 256 KiB.
func LineBytesFor(maxPayload int) int {
	return 6*maxPayload + 256<<10
}

// Sink is a durable, deduplicating JSON Lines appender. It is safe for
// concurrent use.
type Sink struct {
	cfg   Config
	f     *os.File
	size  int64 // end of the last complete line; only the committer changes it after Open
	index *index

	mu      sync.RWMutex // guards closed against sends on queue
	closed  bool
	queue   chan *request
	written chan *batch // committed batches, to be answered
	free    chan *batch // batches for the writer to fill; bounds those in flight
	done    chan struct{}

	// write and sync are the file's Write and Sync; tests watch them.
	write func([]byte) (int, error)
	sync  func() error

	failed atomic.Pointer[error]

	requests sync.Pool // *request, with their line buffers

	records, duplicates, batches, syncs, bytes atomic.Uint64
	existing, corrupt                          uint64
	torn, firstCorrupt                         int64
}

// sender is who a reading is de-duplicated under: the device name, and the
// subject of the client certificate that authenticated it when there is one.
// A redelivery comes from the same sender, so it is still recognised; but a
// reading posted under a certificate-bound device's name by someone without
// its certificate (over HTTP, or over MQTT while client certificates are
// optional) is another sender, so it can never make the genuine reading with
// the same seq pass for a duplicate and go unwritten after its acknowledgement.
// Readings without a certificate share the device name alone: without
// authentication a device can be impersonated, and the README says so.
func sender(device, tlsSubject string) string {
	if tlsSubject == "" {
		return device
	}
	return device + "\x00" + tlsSubject
}

type request struct {
	dev  string
	seq  uint64
	line []byte
	done func(Result, error) // nil: nobody waits (Enqueue)
}

// batch is what one write and fsync carried, from the committer to the
// answers: the requests in the order they were taken, which of them were
// duplicates (not written), and how the commit went.
type batch struct {
	reqs    []*request
	dup     []bool
	buf     bytes.Buffer
	records int           // requests written
	wrote   time.Duration // how long the write and fsync took
	err     error         // the commit's failure, or the sink's before it
}

// batchesInFlight bounds the batches between the committer and the answers:
// one being committed, one waiting, one being answered.
const batchesInFlight = 3

// answer tells the record's submitter what became of it.
func (r *request) answer(dup bool, err error) {
	if r.done != nil {
		r.done(Result{Duplicate: dup}, err)
	}
}

// Open opens (or creates) the file, cuts off a torn last line, rebuilds the
// duplicate index from the records in it, syncs it (SyncFsync), and starts
// the committer.
func Open(cfg Config) (*Sink, error) { return openWith(cfg, nil) }

// openWith is Open; wrap, when not nil, sees the sink before it reads the
// file, so that a test can watch its writes and fsyncs from the start.
func openWith(cfg Config, wrap func(*Sink)) (*Sink, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.DedupeWindow <= 0 {
		cfg.DedupeWindow = DefaultDedupeWindow
	}
	if cfg.MaxDevices <= 0 {
		cfg.MaxDevices = DefaultMaxDevices
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	f, err := os.OpenFile(cfg.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w: %s is a %s", ErrNotFile, cfg.Path, kind(fi.Mode()))
		}
		return nil, err
	}
	s := &Sink{
		cfg:     cfg,
		f:       f,
		index:   newIndex(cfg.DedupeWindow, cfg.MaxDevices),
		queue:   make(chan *request, queueLen),
		written: make(chan *batch, batchesInFlight),
		free:    make(chan *batch, batchesInFlight),
		done:    make(chan struct{}),
		write:   f.Write,
		sync:    f.Sync,
	}
	for range batchesInFlight {
		s.free <- &batch{reqs: make([]*request, 0, cfg.MaxBatch), dup: make([]bool, 0, cfg.MaxBatch)}
	}
	if wrap != nil {
		wrap(s)
	}
	if err := s.recover(); err != nil {
		f.Close()
		return nil, err
	}
	go s.commit()
	go s.answerAll()
	return s, nil
}

// kind names what a file that is not a regular file is.
func kind(m os.FileMode) string {
	switch {
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// recover scans the file: every complete line that is a record feeds the
// index, other complete lines are counted, and a last line without its
// newline is cut off. It holds at most MaxLineBytes of a line: the rest of a
// longer one is read and dropped. Under SyncFsync it then syncs the file:
// the last process may have stopped between a write and its fsync, and a
// redelivery of a record in such a line must not be answered as a duplicate
// while the line may still be lost.
func (s *Sink) recover() error {
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(s.f, 64<<10)
	var off int64
	var line []byte
	for {
		line = line[:0]
		n, long, err := readLine(r, &line, s.cfg.MaxLineBytes)
		if err == nil {
			if long || !s.indexLine(line) {
				if s.corrupt == 0 {
					s.firstCorrupt = off
				}
				s.corrupt++
			}
			off += n
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if n > 0 { // a last line without its newline: never acknowledged
			s.torn = n
			if err := s.f.Truncate(off); err != nil {
				return fmt.Errorf("sink: cutting torn last line: %w", err)
			}
		}
		if n > 0 || s.cfg.Sync == SyncFsync {
			if err := s.sync(); err != nil {
				return fmt.Errorf("sink: %w", err)
			}
		}
		s.size = off
		_, err = s.f.Seek(off, io.SeekStart)
		return err
	}
}

// readLine reads one line into *line, newline included, keeping at most max
// bytes: it returns the line's length in the file, whether it was longer
// than max (then *line is empty), and io.EOF when the file ended before a
// newline.
func readLine(r *bufio.Reader, line *[]byte, max int) (n int64, long bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		n += int64(len(chunk))
		switch {
		case long:
		case len(*line)+len(chunk) > max:
			long, *line = true, (*line)[:0]
		default:
			*line = append(*line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, long, err
		}
	}
}

// indexLine adds the record on line to the index and reports whether it is
// one.
func (s *Sink) indexLine(line []byte) bool {
	var id struct {
		Device     string `json:"device"`
		Seq        uint64 `json:"seq"`
		Provenance struct {
			TLSSubject string `json:"tls_subject"`
		} `json:"provenance"`
	}
	if json.Unmarshal(line, &id) != nil || id.Device == "" {
		return false
	}
	s.index.add(sender(id.Device, id.Provenance.TLSSubject), id.Seq)
	s.existing++
	return true
}

// Append writes rec durably unless its id is already durable, and reports
// which. It blocks until the record's batch is committed, ctx is done (the
// record may still be written), or the sink fails or is closed.
func (s *Sink) Append(ctx context.Context, rec *Record) (Result, error) {
	return Append(ctx, s, rec)
}

// Submitter takes records and answers each once it is durable: a Sink, or
// another store with the same contract (see Sink.Submit).
type Submitter interface {
	Submit(ctx context.Context, rec *Record, done func(Result, error)) error
}

// Append submits rec to s and waits for the answer or for ctx (the record
// may then still be stored).
func Append(ctx context.Context, s Submitter, rec *Record) (Result, error) {
	type outcome struct {
		res Result
		err error
	}
	ch := make(chan outcome, 1)
	if err := s.Submit(ctx, rec, func(r Result, err error) { ch <- outcome{r, err} }); err != nil {
		return Result{}, err
	}
	select {
	case o := <-ch:
		return o.res, o.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Enqueue queues rec for the next batch and returns without waiting for it
// to be committed: for messages nobody acknowledges (MQTT QoS 0), which then
// cost no fsync wait. It blocks only while the queue is full, which slows the
// sender down. It fails when the sink has failed or is closed.
func (s *Sink) Enqueue(ctx context.Context, rec *Record) error {
	return s.Submit(ctx, rec, nil)
}

// Submit queues rec for the next batch and returns without waiting for it
// to be committed; done, unless nil, is called exactly once when it is:
// with a nil error once the record is durable (Result.Duplicate when its id
// already was), or with the error that kept it from being written. done runs
// on the committing goroutine and must not block; it is how a caller
// acknowledges many records without a goroutine waiting for each. Records
// are answered batch by batch, a duplicate of a durable id before the rest
// of its batch: a caller that must answer in order keeps its own order.
// Close answers every record queued before it. Submit blocks only while the queue
// is full, which slows the sender down; when it returns an error, done is
// never called.
func (s *Sink) Submit(ctx context.Context, rec *Record, done func(Result, error)) error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	req := s.newRequest()
	line, err := rec.AppendJSON(slices.Grow(req.line[:0], 512+len(rec.Payload)))
	req.line = append(line, '\n')
	if err == nil && len(req.line) > s.cfg.MaxLineBytes {
		err = fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(req.line), s.cfg.MaxLineBytes)
	}
	if err != nil {
		s.release(req)
		return err
	}
	req.dev, req.seq, req.done = sender(rec.Device, rec.Provenance.TLSSubject), rec.Seq, done
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.release(req)
		return ErrClosed
	}
	select {
	case s.queue <- req:
		return nil
	case <-ctx.Done():
		s.release(req)
		return ctx.Err()
	}
}

// maxPooledLine is the longest line buffer kept for another record.
const maxPooledLine = 16 << 10

// newRequest returns a request from the pool, with the line buffer of an
// earlier record to encode into: a record costs no allocation on its way to
// the file.
func (s *Sink) newRequest() *request {
	if r, ok := s.requests.Get().(*request); ok {
		return r
	}
	return &request{}
}

// release returns r to the pool once nothing refers to it any more.
func (s *Sink) release(r *request) {
	line := r.line[:0]
	if cap(line) > maxPooledLine {
		line = nil
	}
	*r = request{line: line}
	s.requests.Put(r)
}

// commit is the single writer: it takes whatever is queued (up to MaxBatch),
// sets aside the ids already written, writes the rest in one call, fsyncs
// (SyncFsync) and hands the batch to answerAll, then takes what queued
// meanwhile.
func (s *Sink) commit() {
	defer close(s.written)
	for {
		first, ok := <-s.queue
		if !ok {
			return
		}
		b := <-s.free
		b.reqs = append(b.reqs[:0], first)
	fill:
		for len(b.reqs) < s.cfg.MaxBatch {
			select {
			case r, ok := <-s.queue:
				if !ok {
					break fill
				}
				b.reqs = append(b.reqs, r)
			default:
				break fill
			}
		}
		s.writeBatch(b)
		if b.err == nil && b.records > 0 && s.cfg.Sync == SyncFsync {
			start := time.Now()
			if err := s.sync(); err != nil {
				// The batch was never acknowledged, and after a failed
				// fsync its pages may be gone from the disk while a
				// reader still sees them: cut its lines, so that a sink
				// opened on the file again does not take their
				// redelivery for a duplicate.
				_ = s.f.Truncate(s.size - int64(b.buf.Len()))
				b.err = s.fail(err)
			}
			b.wrote += time.Since(start)
			s.syncs.Add(1)
		}
		if b.records > 0 && s.cfg.OnCommit != nil {
			s.cfg.OnCommit(b.records, b.buf.Len(), b.wrote, b.err)
		}
		s.written <- b
	}
}

// writeBatch writes b's records that are not duplicates. The index learns
// each id as it is written, so a duplicate later in the batch or in a later
// one is recognised; it is answered with its batch, after the fsync that
// covers the first copy. When the write fails, the sink has failed and
// refuses every record from then on, so what the index learnt does not
// matter.
func (s *Sink) writeBatch(b *batch) {
	b.buf.Reset()
	b.dup, b.records, b.wrote, b.err = b.dup[:0], 0, 0, nil
	for _, r := range b.reqs {
		dup := s.index.has(r.dev, r.seq)
		b.dup = append(b.dup, dup)
		if dup {
			s.duplicates.Add(1)
			continue
		}
		s.index.add(r.dev, r.seq)
		b.buf.Write(r.line)
		b.records++
	}
	if p := s.failed.Load(); p != nil {
		b.err = *p
		return
	}
	if b.records == 0 {
		return
	}
	start := time.Now()
	nw, err := s.write(b.buf.Bytes())
	b.wrote = time.Since(start)
	s.batches.Add(1)
	if err != nil {
		if nw > 0 && nw < b.buf.Len() {
			// Cut a partial write back to the last complete line, so
			// the file never holds a record nobody acknowledged half-written.
			_ = s.f.Truncate(s.size)
		}
		b.err = s.fail(err)
		return
	}
	s.size += int64(nw)
}

// fail records the sink's failure: every record from now on is refused.
func (s *Sink) fail(err error) error {
	err = fmt.Errorf("%w: %v", ErrFailed, err)
	s.failed.CompareAndSwap(nil, &err)
	return *s.failed.Load()
}

// answerAll answers the committed batches in the order they were committed,
// on a goroutine of its own, so that the next batch is written and synced
// while the callers of the last one are answered (each answer can start a
// goroutine that writes an acknowledgement).
func (s *Sink) answerAll() {
	defer close(s.done)
	for b := range s.written {
		s.answer(b)
		s.free <- b
	}
}

// answer answers b's records: with its failure, else as durable,
// duplicates as such.
func (s *Sink) answer(b *batch) {
	err := b.err
	if err == nil {
		s.records.Add(uint64(b.records))
		s.bytes.Add(uint64(b.buf.Len()))
	}
	for i, r := range b.reqs {
		r.answer(b.dup[i] && err == nil, err)
		s.release(r)
	}
	clear(b.reqs)
}

// Healthy returns nil while the sink accepts records, and the failure or
// ErrClosed otherwise.
func (s *Sink) Healthy() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	return Stats{
		Records:        s.records.Load(),
		Duplicates:     s.duplicates.Load(),
		Batches:        s.batches.Load(),
		Syncs:          s.syncs.Load(),
		Bytes:          s.bytes.Load(),
		Existing:       s.existing,
		TornBytes:      s.torn,
		Corrupt:        s.corrupt,
		FirstCorruptAt: s.firstCorrupt,
		Queued:         len(s.queue),
	}
}

// Close commits every record already queued, then closes the file. Appends
// that start after Close return ErrClosed. When the sink had failed, Close
// returns that failure (wrapping ErrFailed): the records refused since were
// not written.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	var err error
	if p := s.failed.Load(); p != nil {
		err = *p
	} else {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
