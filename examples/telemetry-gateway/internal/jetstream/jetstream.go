// Package jetstream is the gateway's store for replicas: every accepted
// reading is published to a NATS JetStream stream, and the gateway
// acknowledges it to the device only once JetStream has acknowledged the
// write (with an R3 stream: once a majority of the servers has it).
//
// # Duplicates across replicas
//
// Behind one load balancer, a device whose connection broke reconnects to
// whichever replica it is given and sends its unacknowledged readings again.
// A per-replica index cannot recognise a reading another replica stored, so
// the message id travels with the message: each is published with the
// Nats-Msg-Id header MsgID builds from the reading's sender (device, and the
// subject of the client certificate that authenticated it, as the JSON Lines
// sink keys it), device and sequence number, and JetStream drops a message
// whose id it stored within the stream's duplicate window
// (StreamConfig.Duplicates), answering with PubAck.Duplicate: the gateway
// acknowledges it again and counts it, whichever replica stored the first
// copy. The window must outlast a device's reconnect and retry; the default
// of a created stream is two minutes, and Open refuses a stream whose window
// is not longer than AckTimeout (a device whose publish timed out sends the
// reading again only after that).
//
// # Asynchronous, batched publishing
//
// Submit publishes without waiting (nats.go's PublishMsgAsync): the
// connection's writer coalesces what is pending into large writes, the
// server replicates in batches, and the answer arrives on nats.go's ack
// goroutine, which calls the submitter's callback. At most MaxPending
// publishes wait for their answer; Submit blocks beyond that, which slows
// the devices down. A publish that fails (no answer within AckTimeout, the
// connection lost, no stream quorum) is answered with its error: the
// gateway acknowledges nothing, disconnects the device, and the device sends
// the reading again, which JetStream recognises if the first copy was
// stored after all.
package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/sink"
)

// Defaults for zero Config fields.
const (
	DefaultMaxPending = 4096
	DefaultAckTimeout = 5 * time.Second
	DefaultDuplicates = 2 * time.Minute
)

// Errors.
var (
	ErrClosed       = errors.New("jetstream: closed")
	ErrDisconnected = errors.New("jetstream: not connected to NATS")
	ErrWrongStream  = errors.New("jetstream: the subject is stored by another stream")
	ErrShortWindow  = errors.New("jetstream: the stream's duplicate window is too short")
)

// Config configures a Sink.
type Config struct {
	// URL lists the NATS servers, comma-separated (nats://host:4222,…).
	// Required.
	URL string
	// Stream is the JetStream stream that must store the readings. Required.
	Stream string
	// Subject is the prefix of the subjects readings are published to:
	// <Subject>.<device>. Required; the stream must capture <Subject>.>.
	Subject string
	// Replicas, when not zero, creates the stream if it does not exist,
	// with this many replicas, file storage, subjects <Subject>.> and
	// Duplicates as its duplicate window. Zero requires an existing stream.
	Replicas int
	// Duplicates is the duplicate window of a stream Open creates; zero
	// means DefaultDuplicates.
	Duplicates time.Duration
	// MaxPending bounds the publishes waiting for JetStream's answer; zero
	// means DefaultMaxPending.
	MaxPending int
	// AckTimeout is how long a publish waits for its answer before it fails;
	// zero means DefaultAckTimeout.
	AckTimeout time.Duration
	// Name names the NATS connection (the gateway's host name, say).
	Name string
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// Sink publishes records to a JetStream stream. It is safe for concurrent
// use.
type Sink struct {
	cfg  Config
	nc   *nats.Conn
	js   natsjs.JetStream
	log  *slog.Logger
	slot chan struct{} // one token per pending publish

	mu      sync.Mutex
	closed  bool
	pending map[*nats.Msg]func(sink.Result, error)

	records, duplicates, failures atomic.Uint64
}

// MsgID returns the Nats-Msg-Id of a reading: "device/seq" and, for a
// reading authenticated by a client certificate, "/" and the first 16 bytes
// of the SHA-256 of the certificate's subject in hex, so that a reading
// forged under a certificate-bound device's name without its certificate
// never shares the genuine reading's id (see the JSON Lines sink's sender).
// A device name has no '/' (reading.Parse refuses one).
func MsgID(device string, seq uint64, tlsSubject string) string {
	id := device + "/" + strconv.FormatUint(seq, 10)
	if tlsSubject == "" {
		return id
	}
	sum := sha256.Sum256([]byte(tlsSubject))
	return id + "/" + hex.EncodeToString(sum[:16])
}

// Open connects to NATS, finds (or with Replicas creates) the stream, and
// checks that it captures the readings' subjects.
func Open(ctx context.Context, cfg Config) (*Sink, error) {
	if cfg.URL == "" || cfg.Stream == "" || cfg.Subject == "" {
		return nil, errors.New("jetstream: URL, Stream and Subject are required")
	}
	if strings.ContainsAny(cfg.Subject, "*> \t") || strings.HasSuffix(cfg.Subject, ".") {
		return nil, fmt.Errorf("jetstream: subject prefix %q: want tokens without wildcards, such as telemetry", cfg.Subject)
	}
	if cfg.Replicas < 0 || cfg.Replicas > 5 || cfg.MaxPending < 0 || cfg.AckTimeout < 0 || cfg.Duplicates < 0 {
		return nil, errors.New("jetstream: Replicas 0 to 5, MaxPending, AckTimeout and Duplicates ≥ 0")
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = DefaultDuplicates
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sink{cfg: cfg, log: cfg.Logger, slot: make(chan struct{}, cfg.MaxPending), pending: make(map[*nats.Msg]func(sink.Result, error))}
	var err error
	s.nc, err = nats.Connect(cfg.URL,
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // closed by Close
			}
			s.log.Warn("jetstream: disconnected from NATS; readings are refused until it reconnects", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.log.Info("jetstream: reconnected to NATS", "server", nc.ConnectedUrlRedacted())
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect %s: %w", cfg.URL, err)
	}
	s.js, err = natsjs.New(s.nc,
		natsjs.WithPublishAsyncMaxPending(2*cfg.MaxPending), // never reached: Submit waits for a slot first
		natsjs.WithPublishAsyncTimeout(cfg.AckTimeout),
		natsjs.WithPublishAsyncAckHandler(s.acked),
		natsjs.WithPublishAsyncErrHandler(s.failed),
	)
	if err != nil {
		s.nc.Close()
		return nil, err
	}
	if err := s.checkStream(ctx); err != nil {
		s.nc.Close()
		return nil, err
	}
	return s, nil
}

// checkStream finds or creates the stream and checks that it captures the
// readings' subjects, by asking JetStream which stream stores one.
func (s *Sink) checkStream(ctx context.Context) error {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, natsjs.ErrStreamNotFound) && s.cfg.Replicas > 0 {
		st, err = s.js.CreateStream(ctx, natsjs.StreamConfig{
			Name:       s.cfg.Stream,
			Subjects:   []string{s.cfg.Subject + ".>"},
			Storage:    natsjs.FileStorage,
			Replicas:   s.cfg.Replicas,
			Duplicates: s.cfg.Duplicates,
		})
		if err == nil {
			s.log.Info("jetstream: created the stream", "stream", s.cfg.Stream, "subjects", s.cfg.Subject+".>",
				"replicas", s.cfg.Replicas, "duplicate_window", s.cfg.Duplicates)
		}
	}
	if err != nil {
		return fmt.Errorf("jetstream: stream %q: %w", s.cfg.Stream, err)
	}
	info := st.CachedInfo()
	name, err := s.js.StreamNameBySubject(ctx, s.cfg.Subject+".probe")
	if err != nil || name != s.cfg.Stream {
		return fmt.Errorf("%w: %s.> is stored by %q, not %q (%v)", ErrWrongStream, s.cfg.Subject, name, s.cfg.Stream, err)
	}
	if info.Config.Duplicates <= 0 {
		return fmt.Errorf("jetstream: stream %q has no duplicate window: redeliveries would be stored twice", s.cfg.Stream)
	}
	if info.Config.Duplicates <= s.cfg.AckTimeout {
		// A device sends a reading again only after the gateway gave up
		// waiting for its acknowledgement: by then the window has passed.
		return fmt.Errorf("%w: stream %q keeps ids for %v, not longer than the %v a publish waits for its acknowledgement: a reading stored after that wait ended would be stored again when its device sends it again",
			ErrShortWindow, s.cfg.Stream, info.Config.Duplicates, s.cfg.AckTimeout)
	}
	s.log.Info("jetstream: publishing readings", "stream", s.cfg.Stream, "subjects", s.cfg.Subject+".<device>",
		"replicas", info.Config.Replicas, "duplicate_window", info.Config.Duplicates, "server", s.nc.ConnectedUrlRedacted())
	return nil
}

// Submit publishes rec with its message id and returns without waiting for
// JetStream; done, unless nil, is called once with JetStream's answer
// (Result.Duplicate when the id was already stored), from nats.go's
// goroutine. It blocks while MaxPending publishes wait, until ctx is done.
// A record longer than the NATS servers take (their max_payload) is refused
// with an error wrapping sink.ErrTooLarge.
func (s *Sink) Submit(ctx context.Context, rec *sink.Record, done func(sink.Result, error)) error {
	data, err := rec.AppendJSON(make([]byte, 0, 512+len(rec.Payload)))
	if err != nil {
		return err
	}
	if err := s.Healthy(); err != nil {
		return err
	}
	select {
	case s.slot <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	m := &nats.Msg{
		Subject: s.subject(rec.Device),
		Data:    data,
		Header:  nats.Header{natsjs.MsgIDHeader: []string{MsgID(rec.Device, rec.Seq, rec.Provenance.TLSSubject)}},
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.slot
		return ErrClosed
	}
	s.pending[m] = done
	s.mu.Unlock()
	if _, err := s.js.PublishMsgAsync(m); err != nil {
		if _, pending := s.take(m); pending {
			if errors.Is(err, nats.ErrMaxPayload) {
				return fmt.Errorf("jetstream: %w: %d bytes, more than the NATS servers' max_payload of %d (%v)",
					sink.ErrTooLarge, len(data), s.nc.MaxPayload(), err)
			}
			return fmt.Errorf("jetstream: publish: %w", err)
		}
		return nil // the error handler has answered it
	}
	return nil
}

// subject returns the subject of device's readings, <Subject>.<device>. NATS
// refuses a subject with an empty token, and no stream stores it: the
// reading of a device named ".d7", "d7." or "d..7" was never stored, and its
// device was disconnected as by a store failure each time it sent it again.
// Such an empty token is written "%", which no device name holds.
func (s *Sink) subject(device string) string {
	if device != "" && device[0] != '.' && device[len(device)-1] != '.' && !strings.Contains(device, "..") {
		return s.cfg.Subject + "." + device
	}
	tokens := strings.Split(device, ".")
	for i, t := range tokens {
		if t == "" {
			tokens[i] = "%"
		}
	}
	return s.cfg.Subject + "." + strings.Join(tokens, ".")
}

// take removes m from the pending publishes and returns its callback (nil
// for QoS 0) and whether it was still pending (not answered yet).
func (s *Sink) take(m *nats.Msg) (func(sink.Result, error), bool) {
	s.mu.Lock()
	done, ok := s.pending[m]
	delete(s.pending, m)
	s.mu.Unlock()
	if ok {
		<-s.slot
	}
	return done, ok
}

func (s *Sink) acked(_ natsjs.JetStream, m *nats.Msg, pa *natsjs.PubAck) {
	var err error
	if pa.Stream != s.cfg.Stream {
		err = fmt.Errorf("%w: %s stored in %q", ErrWrongStream, m.Subject, pa.Stream)
		s.failures.Add(1)
	} else if pa.Duplicate {
		s.duplicates.Add(1)
	} else {
		s.records.Add(1)
	}
	if done, _ := s.take(m); done != nil {
		done(sink.Result{Duplicate: pa.Duplicate}, err)
	}
}

func (s *Sink) failed(_ natsjs.JetStream, m *nats.Msg, err error) {
	s.failures.Add(1)
	if done, _ := s.take(m); done != nil {
		done(sink.Result{}, fmt.Errorf("jetstream: %w", err))
	}
}

// Healthy returns nil while the sink is connected to NATS.
func (s *Sink) Healthy() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case !s.nc.IsConnected():
		return fmt.Errorf("%w (%v)", ErrDisconnected, s.nc.Status())
	}
	return nil
}

// Stats returns the sink's counters: Records stored, Duplicates recognised
// by JetStream, and Queued publishes waiting for an answer.
func (s *Sink) Stats() sink.Stats {
	return sink.Stats{Records: s.records.Load(), Duplicates: s.duplicates.Load(), Queued: len(s.slot)}
}

// Close waits (at most AckTimeout) for the answers to pending publishes,
// answers the rest with ErrClosed (their devices get no acknowledgement and
// send them again), and closes the connection. Submit fails with ErrClosed
// afterwards.
func (s *Sink) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(s.cfg.AckTimeout):
	}
	s.mu.Lock()
	left := s.pending
	s.pending = map[*nats.Msg]func(sink.Result, error){}
	s.mu.Unlock()
	for _, done := range left {
		if done != nil {
			done(sink.Result{}, ErrClosed)
		}
	}
	s.nc.Close()
	if n := len(left); n > 0 {
		s.log.Warn("jetstream: closed with publishes unanswered; their devices send them again", "publishes", n)
	}
	return nil
}
