package proxyproto

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourceip/sourceip/clientip"
)

// Defaults for the zero fields of [Config].
const (
	// DefaultReadHeaderTimeout bounds how long a connection may take to send
	// its header. The spec asks for at least 3 seconds, to cover a TCP
	// retransmit (section 2).
	DefaultReadHeaderTimeout = 5 * time.Second

	// DefaultMaxPending bounds the connections from trusted proxies waiting
	// for their header or for Accept at any time.
	DefaultMaxPending = 4096

	// DefaultMaxPendingUntrusted bounds the connections from other peers
	// waiting for their header or for Accept at any time.
	DefaultMaxPendingUntrusted = 1024

	// DefaultMaxPendingPerSource bounds the connections from one untrusted
	// source (an IPv4 address or an IPv6 /64) waiting for their header or for
	// Accept at any time.
	DefaultMaxPendingPerSource = 64

	// DefaultMaxOnReject bounds the Config.OnReject calls running at once.
	DefaultMaxOnReject = 64
)

// Config configures a [Listener]. The zero Config is valid and trusts no
// upstream: every connection is served with its socket addresses, and one
// that starts with a PROXY header is closed.
type Config struct {
	// Trust is the trust configuration of the chain the listener serves:
	// the same value handed to the resolver, the middleware and the
	// connection listener (a *clientip.Resolver, or a *clientip.Store to
	// change it while serving). A header is read and believed only from a
	// socket peer the resolver in force trusts as a proxy, by the walk's own
	// test ([clientip.Resolver.TrustsPeer]: TrustedProxies, and
	// TrustUnixSocket for a Unix-domain peer), and such a peer must send one
	// unless Headerless says otherwise. The listener loads the resolver once
	// per connection and judges the whole connection with it; the resolver
	// travels with the connection ([ResolverFromConn]) so that the walk reads
	// the PROXY layer under the trust that believed it. Nil (the default)
	// trusts no upstream; a Trust without a resolver (a nil
	// *clientip.Store, never set) is a configuration error.
	//
	// In hop-count mode (clientip.Config.TrustedHops) without
	// TrustedProxies, the walk steps over any socket peer, but the listener
	// never believes a header from a peer it cannot name: it then trusts
	// only Upstreams, and no upstream when Upstreams is empty.
	Trust clientip.Trust

	// Upstreams, when not empty, narrows the upstreams allowed to send a
	// header to those of Trust's proxies inside it: a load balancer that
	// speaks PROXY protocol among proxies that do not. Every prefix must be
	// trusted by Trust's resolver when the listener is created (covered by
	// its TrustedProxies, by one prefix or several together); one that is
	// not is a configuration error naming it. Per connection the peer must
	// be in both, so a later change of a *clientip.Store that stops trusting
	// an upstream stops its headers too. It does not apply to a Unix-domain
	// peer, which TrustUnixSocket alone decides. The zero value narrows
	// nothing. A trusted proxy outside Upstreams may not send a header (it is
	// refused or discarded as an untrusted peer's, under Untrusted), but its
	// connections still draw on MaxPending, the trusted proxies' budget, so
	// that untrusted peers cannot starve them either.
	Upstreams clientip.PrefixSet

	// Headerless says what to do with a trusted upstream's connection that
	// has no header. The zero value, HeaderlessRefuse, closes it.
	Headerless HeaderlessPolicy

	// Untrusted says what to do with a header from a peer the listener does
	// not trust. The zero value, UntrustedClose, closes the connection.
	// Such a header is never believed.
	Untrusted UntrustedPolicy

	// ReadHeaderTimeout bounds the time from accepting a connection until its
	// header is complete, or until its first bytes show it has none. A
	// connection that misses it is closed. Zero means
	// DefaultReadHeaderTimeout; negative is an error.
	ReadHeaderTimeout time.Duration

	// MaxPending bounds the connections from trusted proxies waiting for
	// their header or for Accept: the peers Trust names as proxies (its
	// TrustedProxies, and a Unix-domain peer under TrustUnixSocket), whether
	// or not Upstreams lists them. While it is reached the listener stops
	// accepting, and new connections wait in the kernel's backlog: a trusted
	// proxy is slowed down, never refused. Untrusted peers never take these
	// slots. In hop-count mode without TrustedProxies, which names no proxy,
	// only Upstreams take them. Zero means DefaultMaxPending; negative is an
	// error.
	MaxPending int

	// MaxPendingUntrusted bounds the connections from the other peers,
	// untrusted ones, waiting for their header or for Accept. A connection
	// from an untrusted peer that arrives while it is reached is closed at
	// once, unread (fail closed), and counted in [Stats].Shed. The listener
	// never stops accepting for untrusted peers, so however many of them hold
	// slots, a trusted proxy's connection is taken from the kernel's backlog
	// without waiting behind theirs. Zero means DefaultMaxPendingUntrusted;
	// negative is an error.
	MaxPendingUntrusted int

	// MaxPendingPerSource bounds the connections from one untrusted source
	// waiting for their header or for Accept, a source being an IPv4 address
	// or an IPv6 /64 (an IPv6 host can usually pick any address in its /64;
	// an IPv6 address that carries an IPv4 one, 6to4, Teredo or NAT64
	// 64:ff9b::/96, is that IPv4 address, as clientip.RateLimitKey has it;
	// all Unix-domain peers are one source). A connection over it is closed
	// at once, unread, and counted in [Stats].Shed, so a single source cannot
	// take the whole untrusted budget. It does not apply to trusted proxies,
	// each of which carries many clients. Zero means
	// DefaultMaxPendingPerSource; negative is an error.
	MaxPendingPerSource int

	// MaxHeaderBytes bounds the length of a trusted upstream's header, from
	// MaxHeaderLen (16+4096 bytes) to MaxHeaderBytesLimit (16+65535, the
	// largest v2 header). Raise it for a load balancer that forwards client
	// certificates in the SSL TLV (PP2_SUBTYPE_SSL_CLIENT_CERT, see [SSL]),
	// which with a long certificate can pass 4 KiB. Every pending connection
	// reads into a buffer of about MaxHeaderLen bytes, whatever this says;
	// only a trusted upstream's connection whose v2 length field asks for
	// more, within this bound, gets a buffer of its header's exact size, so
	// raising it costs memory only for the headers that need it, and at most
	// MaxPending × MaxHeaderBytes at once. A header from a peer the listener
	// does not trust (under UntrustedIgnore) is always held to
	// MaxHeaderLen. A longer header is refused with [ErrHeaderTooLong]. Zero
	// means MaxHeaderLen; any other value outside that range is an error.
	MaxHeaderBytes int

	// OnReject, when set, is called for a connection the listener refuses
	// after reading from it, after closing it and freeing its pending slot (a
	// slow callback holds no budget), on a goroutine of the listener's (never
	// the one accepting from the inner listener). It may be called
	// concurrently, at most MaxOnReject times at once, and should return
	// promptly: a rejection that comes while MaxOnReject calls are running is
	// not reported, only counted in [Stats].Rejected and [Stats].Unreported,
	// so that a flood of refused connections cannot pile up goroutines
	// behind a slow callback. Connections shed on arrival over a pending
	// budget are not reported here either, only counted in [Stats].Shed.
	OnReject func(Rejection)

	// MaxOnReject bounds the OnReject calls running at once, each holding
	// a goroutine. Zero means DefaultMaxOnReject; negative is an error.
	MaxOnReject int

	// OnAcceptError, when set, is called with every error of the inner
	// listener's Accept except those caused by Close. For a temporary error
	// (such as EMFILE or ENFILE: out of file descriptors) retryIn is the
	// back-off, doubling from 5 ms to at most 1 s and reset by the next
	// success, after which the listener tries again; for any other error
	// retryIn is 0 and the listener stops, Accept returning that error. It is
	// called on the listener's accepting goroutine before it backs off, so it
	// should return promptly, for example by logging:
	//
	//	OnAcceptError: func(err error, retryIn time.Duration) {
	//		slog.Warn("accept failed", "err", err, "retry_in", retryIn)
	//	},
	//
	// Every such error is counted in [Stats].AcceptErrors.
	OnAcceptError func(err error, retryIn time.Duration)
}

// Listener is a [net.Listener] that reads and validates each connection's
// PROXY protocol header under a trust policy before Accept returns it.
//
// Headers are read eagerly, before Accept returns a connection, and Accept
// only ever returns connections that passed, as [*Conn]. A connection whose
// header (or, without one, its first bytes) has already arrived when it is
// accepted, as with a load balancer that sends the header at once, is judged
// on the spot; any other gets a goroutine that reads under
// Config.ReadHeaderTimeout. A silent client therefore never blocks Accept, a
// refused connection never reaches the caller's accept loop (it is closed,
// counted in [Listener.Stats] and reported to Config.OnReject), and
// RemoteAddr never blocks. From the first call to Accept on, it accepts from
// the inner listener ahead of Accept, holding at most Config.MaxPending
// connections from trusted proxies and Config.MaxPendingUntrusted from
// other peers (Config.MaxPendingPerSource from any one of them) that wait for
// their header or for Accept; untrusted connections over budget are closed on
// arrival. go-proxyproto's own Listener, its policies and its package-level
// defaults are not used; its parser is.
//
// A Listener is safe for concurrent use.
type Listener struct {
	inner      net.Listener
	trust      clientip.Trust // nil: no upstream is trusted
	upstreams  clientip.PrefixSet
	headerless HeaderlessPolicy
	untrusted  UntrustedPolicy
	timeout    time.Duration
	maxV2      int // the longest v2 address block and TLVs of a trusted upstream
	onReject   func(Rejection)
	reporting  chan struct{} // one token per OnReject call running
	onAcceptEr func(error, time.Duration)

	start     sync.Once
	slots     chan struct{} // one token per pending connection from a trusted proxy
	untrust   untrustedBudget
	ready     chan *Conn
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	failed    chan struct{} // closed when the inner Accept fails for good
	failErr   error

	mu       sync.Mutex
	inflight map[net.Conn]struct{} // connections whose header is being read

	pending                                         atomic.Int64
	inline                                          atomic.Uint64 // judged without waiting (tests)
	waited                                          atomic.Uint64 // handed to a goroutine to wait (tests)
	grown                                           atomic.Uint64 // buffers grown for a long header (tests)
	accepted, proxied, local, ignored, acceptErrors atomic.Uint64
	unreported                                      atomic.Uint64
	rejected                                        [numReasons]atomic.Uint64
	shed                                            [numShedReasons]atomic.Uint64
}

// NewListener returns a Listener that accepts from inner under cfg, or an
// error wrapping [ErrInvalidConfig]. inner is typically a TCP listener; the
// Listener owns it and closes it on Close.
func NewListener(inner net.Listener, cfg Config) (*Listener, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: inner listener is nil", ErrInvalidConfig)
	}
	l := &Listener{
		inner:      inner,
		trust:      cfg.Trust,
		upstreams:  cfg.Upstreams,
		headerless: cfg.Headerless,
		untrusted:  cfg.Untrusted,
		timeout:    cfg.ReadHeaderTimeout,
		onReject:   cfg.OnReject,
		onAcceptEr: cfg.OnAcceptError,
		ready:      make(chan *Conn),
		done:       make(chan struct{}),
		failed:     make(chan struct{}),
		inflight:   make(map[net.Conn]struct{}),
	}
	maxPending, maxUntrusted, perSource := cfg.MaxPending, cfg.MaxPendingUntrusted, cfg.MaxPendingPerSource
	switch {
	case cfg.Headerless > HeaderlessAllow:
		return nil, fmt.Errorf("%w: Headerless %s", ErrInvalidConfig, cfg.Headerless)
	case cfg.Untrusted > UntrustedIgnore:
		return nil, fmt.Errorf("%w: Untrusted %s", ErrInvalidConfig, cfg.Untrusted)
	case cfg.ReadHeaderTimeout < 0:
		return nil, fmt.Errorf("%w: ReadHeaderTimeout %v is negative", ErrInvalidConfig, cfg.ReadHeaderTimeout)
	case maxPending < 0:
		return nil, fmt.Errorf("%w: MaxPending %d is negative", ErrInvalidConfig, cfg.MaxPending)
	case maxUntrusted < 0:
		return nil, fmt.Errorf("%w: MaxPendingUntrusted %d is negative", ErrInvalidConfig, cfg.MaxPendingUntrusted)
	case perSource < 0:
		return nil, fmt.Errorf("%w: MaxPendingPerSource %d is negative", ErrInvalidConfig, cfg.MaxPendingPerSource)
	case cfg.MaxOnReject < 0:
		return nil, fmt.Errorf("%w: MaxOnReject %d is negative", ErrInvalidConfig, cfg.MaxOnReject)
	case cfg.MaxHeaderBytes != 0 && (cfg.MaxHeaderBytes < MaxHeaderLen || cfg.MaxHeaderBytes > MaxHeaderBytesLimit):
		return nil, fmt.Errorf("%w: MaxHeaderBytes %d is outside [%d, %d]", ErrInvalidConfig, cfg.MaxHeaderBytes, MaxHeaderLen, MaxHeaderBytesLimit)
	}
	if err := checkUpstreams(cfg.Trust, cfg.Upstreams); err != nil {
		return nil, err
	}
	l.maxV2 = MaxV2Payload
	if cfg.MaxHeaderBytes != 0 {
		l.maxV2 = cfg.MaxHeaderBytes - v2FixedLen
	}
	if l.timeout == 0 {
		l.timeout = DefaultReadHeaderTimeout
	}
	if maxPending == 0 {
		maxPending = DefaultMaxPending
	}
	if maxUntrusted == 0 {
		maxUntrusted = DefaultMaxPendingUntrusted
	}
	if perSource == 0 {
		perSource = DefaultMaxPendingPerSource
	}
	l.slots = make(chan struct{}, maxPending)
	maxOnReject := cfg.MaxOnReject
	if maxOnReject == 0 {
		maxOnReject = DefaultMaxOnReject
	}
	l.reporting = make(chan struct{}, maxOnReject)
	l.untrust = untrustedBudget{max: maxUntrusted, perSource: perSource, bySource: make(map[netip.Prefix]int)}
	return l, nil
}

// Accept waits for and returns the next connection whose header passed,
// always a [*Conn]. After Close it returns an error wrapping [net.ErrClosed];
// if the inner listener fails for good, it returns that error.
func (l *Listener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.serve() })
	select {
	case c := <-l.ready:
		return l.count(c), nil
	default:
	}
	select {
	case c := <-l.ready:
		return l.count(c), nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: l.inner.Addr().Network(), Addr: l.inner.Addr(), Err: net.ErrClosed}
	case <-l.failed:
		return nil, l.failErr
	}
}

// count frees c's pending slot and records c in the counters as Accept
// returns it, so that Stats is exact when Accept returns.
func (l *Listener) count(c *Conn) *Conn {
	l.release(c.proxy, c.facts.Peer.Addr())
	l.accepted.Add(1)
	switch c.facts.Command {
	case CommandProxy:
		l.proxied.Add(1)
	case CommandLocal:
		l.local.Add(1)
	}
	if c.ignored {
		l.ignored.Add(1)
	}
	return c
}

// Close stops accepting, closes the inner listener, and closes connections
// still waiting for their header or for Accept. Connections already returned
// by Accept are not affected.
func (l *Listener) Close() error {
	err := net.ErrClosed
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.inner.Close()
		l.mu.Lock()
		for c := range l.inflight {
			c.SetReadDeadline(aLongTimeAgo)
		}
		l.mu.Unlock()
	})
	return err
}

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Stats returns the listener's counters. It is safe to call at any time.
func (l *Listener) Stats() Stats {
	s := Stats{
		Accepted:         l.accepted.Load(),
		Proxied:          l.proxied.Load(),
		Local:            l.local.Load(),
		Ignored:          l.ignored.Load(),
		Pending:          int(l.pending.Load()),
		PendingUntrusted: l.untrust.load(),
		AcceptErrors:     l.acceptErrors.Load(),
		Unreported:       l.unreported.Load(),
	}
	for i := range s.Rejected {
		s.Rejected[i] = l.rejected[i].Load()
	}
	for i := range s.Shed {
		s.Shed[i] = l.shed[i].Load()
	}
	return s
}

var aLongTimeAgo = time.Unix(1, 0)

func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// serve accepts from the inner listener and gives each connection a pending
// slot until it is handed to Accept or refused: a trusted proxy's
// connection waits for a slot of its own budget, an untrusted peer's is shed
// when its budget is spent, so untrusted peers never stop the loop. A
// connection whose header (or first bytes) already arrived is judged right
// here, without a deadline or a goroutine of its own; the others get a
// goroutine that reads with the deadline.
func (l *Listener) serve() {
	var delay time.Duration
	for {
		nc, err := l.inner.Accept()
		if err != nil {
			if l.closed() {
				return
			}
			if delay = l.acceptFailed(err, delay); delay == 0 {
				return
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		hs := &handshake{nc: nc, start: time.Now()}
		hs.peer = socketAddrPort(nc.RemoteAddr())
		if l.trust != nil {
			hs.res = l.trust.Resolver() // once: the whole connection is judged with it
		}
		hs.trusted, hs.proxy = l.trusts(hs.res, hs.peer)
		if hs.proxy {
			select {
			case l.slots <- struct{}{}:
			case <-l.done:
				nc.Close()
				return
			}
		} else if why, ok := l.untrust.take(hs.peer.Addr()); !ok {
			l.shed[why].Add(1)
			shed(nc)
			continue
		}
		l.pending.Add(1)
		hs.buf = bufPool.Get().(*[bufSize]byte)
		if n, rerr, ok := tryRead(nc, hs.buf[:]); ok {
			hs.have, hs.rerr = n, rerr
			if r, done := l.judge(hs); done {
				l.inline.Add(1)
				l.finish(hs, r, true)
				continue
			}
		}
		l.waited.Add(1)
		go l.wait(hs)
	}
}

// acceptFailed counts and reports an error of the inner Accept and returns
// the back-off before the next try, or 0 when the error is permanent, after
// which Accept returns it. Temporary errors (EMFILE, ENFILE) back off as
// net/http does: 5 ms, doubling up to 1 s, reset by a success.
func (l *Listener) acceptFailed(err error, delay time.Duration) time.Duration {
	l.acceptErrors.Add(1)
	var te interface{ Temporary() bool }
	if errors.As(err, &te) && te.Temporary() {
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
	} else {
		delay = 0
		l.failErr = err
	}
	if l.onAcceptEr != nil {
		l.onAcceptEr(err, delay)
	}
	if delay == 0 {
		close(l.failed)
	}
	return delay
}

// trusts reports whether a connection from the socket peer peer (the zero
// value for a Unix-domain socket), judged under r (nil without a Trust),
// comes from a trusted upstream, whose header may be believed, and whether
// it comes from a trusted proxy, which draws on the trusted pending budget:
// every trusted upstream, and the proxies r names that Upstreams leaves
// out. Every trust decision of the listener is made here.
func (l *Listener) trusts(r *clientip.Resolver, peer netip.AddrPort) (upstream, proxy bool) {
	a := peer.Addr()
	switch {
	case r == nil || !r.TrustsPeer(a):
		return false, false
	case !a.IsValid():
		return true, true // a Unix-domain peer under TrustUnixSocket
	}
	if l.upstreams.Len() > 0 && l.upstreams.Contains(a) {
		return true, true
	}
	// Hop-count mode without TrustedProxies steps over any peer in the
	// walk; that names no proxy, and no upstream but those listed.
	c := r.Config()
	named := c.TrustedHops == 0 || c.TrustedProxies.Len() > 0
	return named && l.upstreams.Len() == 0, named
}

// checkUpstreams refuses Upstreams without a Trust, a Trust whose Resolver
// is nil (a nil *clientip.Store's is), and an Upstreams prefix the Trust's
// resolver does not trust.
func checkUpstreams(t clientip.Trust, ups clientip.PrefixSet) error {
	if t == nil {
		if ups.Len() > 0 {
			return fmt.Errorf("%w: Upstreams %s without a Trust: no upstream would be trusted", ErrInvalidConfig, ups)
		}
		return nil
	}
	r := t.Resolver()
	if r == nil { // a nil *clientip.Store, say
		return fmt.Errorf("%w: Trust %T returned a nil Resolver", ErrInvalidConfig, t)
	}
	c := r.Config()
	if c.TrustedHops > 0 && c.TrustedProxies.Len() == 0 {
		return nil // the walk steps over any peer
	}
	for _, p := range ups.Prefixes() {
		if !c.TrustedProxies.Covers(p) {
			return fmt.Errorf("%w: Upstreams prefix %s is not trusted by the Trust's resolver (not covered by its TrustedProxies)", ErrInvalidConfig, p)
		}
	}
	return nil
}

// handshake is one connection whose header is being read.
type handshake struct {
	nc      net.Conn
	start   time.Time
	peer    netip.AddrPort
	res     *clientip.Resolver // the resolver in force when it was accepted
	trusted bool               // a trusted upstream: its header is believed
	proxy   bool               // a trusted proxy: it draws on the trusted budget
	buf     *[bufSize]byte     // from bufPool; nil once big replaces it
	big     []byte             // a trusted upstream's header longer than buf
	have    int                // bytes read
	rerr    error              // the last read's error
}

// bytes returns the buffer hs reads into.
func (hs *handshake) bytes() []byte {
	if hs.big != nil {
		return hs.big
	}
	return hs.buf[:]
}

func (l *Listener) track(nc net.Conn) {
	l.mu.Lock()
	l.inflight[nc] = struct{}{}
	l.mu.Unlock()
	if l.closed() {
		nc.SetReadDeadline(aLongTimeAgo)
	}
}

func (l *Listener) untrack(nc net.Conn) {
	l.mu.Lock()
	delete(l.inflight, nc)
	l.mu.Unlock()
}

// bufSize holds the largest header under the default limit and whatever
// arrives with it in one read.
const bufSize = MaxHeaderLen + 512

var bufPool = sync.Pool{New: func() any { return new([bufSize]byte) }}

// wait reads the rest of hs's header under the deadline, then finishes it.
func (l *Listener) wait(hs *handshake) {
	var r outcome
	// The deadline first: Close cancels tracked reads by moving it.
	if err := hs.nc.SetReadDeadline(hs.start.Add(l.timeout)); err != nil {
		r = outcome{reason: ReasonIncomplete, err: fmt.Errorf("%w: %w", ErrIncomplete, err)}
	} else {
		l.track(hs.nc)
		r = l.readHeader(hs)
		l.untrack(hs.nc)
	}
	if r.err == nil {
		hs.nc.SetReadDeadline(time.Time{})
	}
	l.finish(hs, r, false)
}

// readHeader reads until judge decides.
func (l *Listener) readHeader(hs *handshake) outcome {
	for {
		if r, done := l.judge(hs); done {
			return r
		}
		var m int
		m, hs.rerr = hs.nc.Read(hs.bytes()[hs.have:])
		hs.have += m
	}
}

// finish hands hs's connection to Accept, which releases its slot, or closes
// it and releases its slot.
// A refused connection's slot is released before OnReject runs, so that a
// slow callback holds no budget for a connection that is gone; from the
// accept loop (inline), OnReject runs in a goroutine of its own so that it
// cannot stall accepting either. At most cap(l.reporting) calls run at once;
// a rejection beyond them is counted, not reported.
func (l *Listener) finish(hs *handshake, r outcome, inline bool) {
	if hs.buf != nil {
		bufPool.Put(hs.buf)
	}
	hs.buf, hs.big = nil, nil
	nc := hs.nc
	if r.err != nil {
		// Counted, reported or not, before the peer can see the close;
		// closing the listener is not a rejection.
		if l.closed() {
			nc.Close()
			l.release(hs.proxy, hs.peer.Addr())
			return
		}
		l.rejected[r.reason].Add(1)
		report := false
		if l.onReject != nil {
			select {
			case l.reporting <- struct{}{}:
				report = true
			default:
				l.unreported.Add(1)
			}
		}
		nc.Close()
		l.release(hs.proxy, hs.peer.Addr())
		if !report {
			return
		}
		rej := Rejection{
			Peer:     hs.peer,
			Local:    socketAddrPort(nc.LocalAddr()),
			Trusted:  hs.trusted,
			Version:  r.version,
			Reason:   r.reason,
			Err:      r.err,
			Duration: time.Since(hs.start),
		}
		if inline {
			go l.report(rej)
		} else {
			l.report(rej)
		}
		return
	}
	r.facts.Peer = hs.peer
	r.facts.Local = socketAddrPort(nc.LocalAddr())
	// The walk honours this judgement for the connection's lifetime: a
	// discarded header means the bytes after it are not the peer's.
	r.facts.PeerUntrusted = r.ignored || hs.res != nil && !hs.res.TrustsPeer(hs.peer.Addr())
	c := newConn(nc, r.facts, r.rest)
	c.ignored, c.proxy = r.ignored, hs.proxy
	c.trust, c.res = l.trust, hs.res
	select {
	case l.ready <- c: // Accept frees the slot as it takes c
	case <-l.done:
		nc.Close()
		l.release(hs.proxy, hs.peer.Addr())
	}
}

// report calls OnReject with r and gives back the token finish took for it.
func (l *Listener) report(r Rejection) {
	defer func() { <-l.reporting }()
	l.onReject(r)
}

// release frees the pending slot of a connection from peer, taken from the
// trusted budget if proxy is set.
func (l *Listener) release(proxy bool, peer netip.Addr) {
	l.pending.Add(-1)
	if proxy {
		<-l.slots
	} else {
		l.untrust.release(peer)
	}
}

// outcome is what judge learnt: facts and the bytes after the header, or
// why the connection is refused.
type outcome struct {
	facts   Facts
	rest    []byte
	ignored bool
	version uint8
	reason  Reason
	err     error
}

func versionOf(k frameKind) uint8 {
	switch k {
	case frameV1:
		return 1
	case frameV2:
		return 2
	}
	return 0
}

// judge decides what to do with the bytes read so far and the last read's
// error, or reports that more bytes are needed. The trust policy applies as
// soon as it can: an untrusted header is refused at its signature, before the
// rest is read.
func (l *Listener) judge(hs *handshake) (outcome, bool) {
	buf, have, rerr := hs.bytes(), hs.have, hs.rerr
	maxV2 := MaxV2Payload
	if hs.trusted {
		maxV2 = max(l.maxV2, MaxV2Payload)
	}
	k, n, ferr := frame(buf[:have], maxV2)
	if k == frameMore && rerr != nil && isEOF(rerr) {
		// The peer finished before a signature could match: no header.
		k = frameNone
	}
	ver := versionOf(k)
	switch {
	case k == frameNone:
		if hs.trusted && l.headerless == HeaderlessRefuse {
			err := ErrNoHeader
			if have == 0 && rerr != nil {
				err = fmt.Errorf("%w: peer sent nothing before closing", ErrNoHeader)
			}
			return outcome{reason: ReasonNoHeader, err: err}, true
		}
		// A trusted peer is one of Upstreams when they are listed: a PROXY
		// load balancer, which writes no forwarding header of its own.
		return outcome{facts: Facts{NoHeaderFromUpstream: hs.trusted && l.upstreams.Len() > 0}, rest: clone(buf[:have])}, true
	case k != frameMore && !hs.trusted && l.untrusted == UntrustedClose:
		return outcome{version: ver, reason: ReasonUntrusted, err: ErrUntrustedHeader}, true
	case errors.Is(ferr, errV2TooLong):
		return outcome{version: ver, reason: ReasonInvalid, err: fmt.Errorf("%w: %w: v2 length %d, more than %d",
			ErrInvalidHeader, ErrHeaderTooLong, v2Length(buf), maxV2)}, true
	case ferr != nil:
		return outcome{version: ver, reason: ReasonInvalid, err: fmt.Errorf("%w: %w", ErrInvalidHeader, ferr)}, true
	case n > 0:
		// An untrusted peer's header (under UntrustedIgnore) is validated as
		// strictly as a trusted one's before it is thrown away: a header
		// that breaks the rules leaves no sure place where the client's
		// bytes begin.
		h, err := parseFrame(buf[:n])
		if err != nil {
			return outcome{version: ver, reason: ReasonInvalid, err: err}, true
		}
		if !hs.trusted {
			return outcome{rest: clone(buf[n:have]), ignored: true}, true
		}
		return outcome{
			facts: Facts{Version: h.Version, Command: h.Command, Source: h.Source, Destination: h.Destination, TLVs: h.TLVs},
			rest:  clone(buf[n:have]),
		}, true
	}
	if rerr != nil {
		var ne net.Error
		if errors.As(rerr, &ne) && ne.Timeout() {
			return outcome{version: ver, reason: ReasonTimeout, err: fmt.Errorf("%w after %d bytes", ErrTimeout, have)}, true
		}
		return outcome{version: ver, reason: ReasonIncomplete, err: fmt.Errorf("%w after %d bytes: %w", ErrIncomplete, have, rerr)}, true
	}
	if k == frameV2 && have >= v2FixedLen && hs.trusted {
		if need := v2FixedLen + v2Length(buf); need > len(buf) {
			l.grow(hs, need) // frame checked need against the trusted limit
			return outcome{}, false
		}
	}
	if have == len(buf) {
		return outcome{version: ver, reason: ReasonInvalid, err: fmt.Errorf("%w: %w", ErrInvalidHeader, ErrHeaderTooLong)}, true
	}
	return outcome{}, false
}

// grow gives hs a buffer of exactly need bytes, for a trusted upstream's
// header longer than the pooled buffer; reads then end where the header
// does, and what follows stays in the socket for the application.
func (l *Listener) grow(hs *handshake, need int) {
	big := make([]byte, need)
	copy(big, hs.buf[:hs.have])
	bufPool.Put(hs.buf)
	hs.buf, hs.big = nil, big
	l.grown.Add(1)
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}
