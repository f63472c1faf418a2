package explain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/trafficpolicy"
)

// Config configures a [Handler]. Only Trust is required; a Config with
// nothing else refuses every request, so an explain endpoint is off until
// Allow or AllowPeers names who may see it.
type Config struct {
	// Trust is the trust configuration the application resolves with: the
	// same value its middleware and listeners read, so that the
	// explanation shows the configuration in force. Required.
	Trust clientip.Trust

	// Allow admits a request whose client the walk resolves, without error,
	// to an address in the set: an operator's own address, reached through
	// the deployment's proxies. A request the walk cannot resolve, or
	// resolves to a masquerading node, is not admitted by Allow. The zero
	// value admits no one.
	Allow clientip.PrefixSet

	// AllowPeers admits a request whose socket peer is in the set, whatever
	// the walk says of it: for explaining failed resolutions from a host
	// that connects to the server directly (a bastion, localhost through
	// kubectl port-forward). A peer that is a trusted proxy under the
	// Resolver in force never qualifies, since it stands for every client
	// behind it. The zero value admits no one.
	AllowPeers clientip.PrefixSet

	// Policy, when not nil, is the Service traffic-policy case the
	// deployment runs under: each report then shows what
	// [trafficpolicy.Expect] says of it and compares that with the request.
	Policy *trafficpolicy.Case

	// Network holds the node and load-balancer addresses that Policy's
	// comparisons need (which kind of peer the socket shows, the recipe's
	// trusted set). The zero value knows no addresses.
	Network trafficpolicy.Network

	// Advisor, when not nil, is served at ?view=advice: its current
	// proposal, for the same admitted requests.
	Advisor *Advisor
}

// Handler serves explanations of the requests it receives, and of
// connections its caller names (see [Handler.ServeConn]), to the requests
// its Config admits; every other request is answered 404 Not Found, as if
// nothing were mounted.
//
// An explanation reveals the trust configuration (which proxies are
// trusted, which header is read), the request's headers and the PROXY
// header's TLVs: everything an attacker needs to aim a forged header. Mount
// it on an admin listener where you can, admit operators only, and prefer
// AllowPeers for an admin network over Allow on a public listener.
//
// The response is JSON (the [Report] document) or, for curl, plain text:
// text when the query has format=text or the Accept header prefers
// text/plain or is exactly */* (curl's and wget's default); JSON when the
// query has format=json or otherwise. Responses are marked Cache-Control:
// no-store. Only GET and HEAD are served.
//
// A Handler is safe for concurrent use.
type Handler struct {
	cfg   Config
	allow *middleware.Policy // judges Allow (one rule); nil when it is empty
}

// New returns a Handler for cfg, or an error wrapping [ErrInvalidConfig]
// when cfg.Trust is nil.
func New(cfg Config) (*Handler, error) {
	if cfg.Trust == nil {
		return nil, fmt.Errorf("%w: Trust is required", ErrInvalidConfig)
	}
	h := &Handler{cfg: cfg}
	if cfg.Allow.Len() > 0 {
		allow, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{Allow: cfg.Allow})
		if err != nil {
			return nil, fmt.Errorf("%w: Allow: %w", ErrInvalidConfig, err)
		}
		h.allow = allow
	}
	return h, nil
}

// Check reports whether h admits r: nil, or [ErrNotAllowed]. It resolves r
// with the Resolver in force; it is pure otherwise.
func (h *Handler) Check(r *http.Request) error {
	rv := h.cfg.Trust.Resolver()
	res, err := rv.ResolveRequest(r)
	if h.allow != nil && h.allow.Check("", res, err) == nil {
		return nil
	}
	if h.cfg.AllowPeers.Len() > 0 {
		peer := res.Peer.Addr()
		if peer.IsValid() && h.cfg.AllowPeers.Contains(peer) && !rv.TrustsPeer(peer) {
			return nil
		}
	}
	return ErrNotAllowed
}

// ServeHTTP answers an admitted GET or HEAD request with the explanation of
// that request, or with the Advisor's proposal for ?view=advice.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !h.admit(w, r) {
		return
	}
	switch r.URL.Query().Get("view") {
	case "", "explain":
		rep := h.Report(r)
		h.write(w, r, &rep)
	case "advice":
		if h.cfg.Advisor == nil {
			http.Error(w, "no advisor is configured", http.StatusNotFound)
			return
		}
		adv := h.cfg.Advisor.Advice()
		h.write(w, r, &adv)
	default:
		http.Error(w, "unknown view: want explain or advice", http.StatusBadRequest)
	}
}

// ServeConn answers an admitted GET or HEAD request r with the explanation
// of connection c (see [Handler.ReportConn]), named id: for an admin
// endpoint that looks connections up by id.
func (h *Handler) ServeConn(w http.ResponseWriter, r *http.Request, c net.Conn, id string) {
	if h.admit(w, r) {
		rep := h.ReportConn(c, id)
		h.write(w, r, &rep)
	}
}

// admit answers requests h does not serve, and reports whether r is one it does.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set("Cache-Control", "no-store")
	if h.Check(r) != nil {
		http.NotFound(w, r)
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return false
	}
	return true
}

// textWriter is a document that renders itself as text.
type textWriter interface {
	WriteText(w io.Writer) error
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, doc textWriter) {
	var b bytes.Buffer
	if wantsText(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		doc.WriteText(&b)
	} else {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			http.Error(w, "cannot encode the explanation", http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b.Bytes())
}

// wantsText reports whether r asks for plain text: format=text, or an
// Accept header that prefers text/plain to application/json or is exactly
// "*/*" (curl's and wget's default).
func wantsText(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "text":
		return true
	case "json":
		return false
	}
	accept := strings.TrimSpace(r.Header.Get("Accept"))
	if accept == "*/*" {
		return true
	}
	text, js := -1.0, -1.0
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if _, err := fmt.Sscanf(v, "%g", &q); err != nil {
				continue
			}
		}
		switch mt {
		case "text/plain":
			text = max(text, q)
		case "application/json":
			js = max(js, q)
		}
	}
	return text > 0 && text > js
}

// Report explains r, as the Resolver in force resolves it, without
// checking that r is admitted.
func (h *Handler) Report(r *http.Request) Report {
	rv := h.cfg.Trust.Resolver()
	cfg := rv.Config()
	x := cleanPeer(rv.ExplainRequest(r))
	f, hasFacts := proxyproto.FactsFromContext(r.Context())
	local := f.Local
	if !hasFacts {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			local = addrPort(la)
		}
	}
	rep := build(cfg, x, f, hasFacts, local, r.Header)
	rep.Kind = "request"
	rep.Request = &RequestInfo{Method: clip(r.Method), Host: clip(r.Host), Path: clip(r.URL.Path), Proto: r.Proto}
	if h.cfg.Policy != nil {
		_, viaTransport := clientip.TransportFromContext(r.Context())
		rep.Policy = policyInfo(*h.cfg.Policy, h.cfg.Network, cfg, x.Result, x.Err,
			f.Command == proxyproto.CommandProxy, hasFacts || viaTransport)
	}
	return rep
}

// ReportConn explains connection c, accepted through
// [middleware.NewListener]: the walk over its socket peer and PROXY
// source, with the PROXY header's TLVs, under the resolver the connection
// is resolved with (for a connection from a proxyproto.Listener with the
// same Trust, the one it was judged with when it arrived; see
// proxyproto.ResolverFromConn). When the resolution recorded at accept
// differs (the trust configuration changed since), the report shows it too. A connection that did not come
// from NewListener is explained as unresolved, with [middleware.ErrNoResult].
// id names the connection in the report ("" for none).
func (h *Handler) ReportConn(c net.Conn, id string) Report {
	// The resolver the PROXY listener judged c with, as NewListener
	// resolved it, and the transport it recorded.
	rv := proxyproto.ResolverFromConn(c, h.cfg.Trust)
	cfg := rv.Config()
	recRes, recErr := middleware.ResultFromConn(c)
	f, hasFacts := proxyproto.FactsFromConn(c)
	t := clientip.Transport{Peer: recRes.Peer, Proxy: recRes.Proxy}
	if hasFacts {
		t = f.Transport()
	}
	var x clientip.Explanation
	if errors.Is(recErr, middleware.ErrNoResult) {
		x = clientip.Explanation{Result: recRes, Err: recErr}
	} else {
		x = rv.Explain(t, nil)
	}
	local := f.Local
	if !hasFacts {
		local = addrPort(c.LocalAddr())
	}
	x, recRes = cleanPeer(x), cleanResultPeer(recRes)
	rep := build(cfg, x, f, hasFacts, local, nil)
	rep.Kind = "connection"
	rep.Connection = &ConnInfo{ID: clip(id), Remote: addrString(c.RemoteAddr()), Local: addrString(c.LocalAddr())}
	switch {
	case errors.Is(recErr, middleware.ErrNoResult):
		rep.Error.Hint = "the connection was not accepted through middleware.NewListener, so nothing was resolved for it"
	case recRes != x.Result || clientip.ReasonOf(recErr) != clientip.ReasonOf(x.Err):
		rep.Recorded = &RecordedInfo{Summary: summary(recRes, recErr), Result: resultInfo(recRes), Error: errorInfo(recErr)}
		rep.Notes = append(rep.Notes, "The resolution recorded when the connection was accepted differs from the walk under the configuration in force now: the trust configuration changed since, and the connection keeps its recorded answer.")
	}
	if h.cfg.Policy != nil {
		rep.Policy = policyInfo(*h.cfg.Policy, h.cfg.Network, cfg, x.Result, x.Err, f.Command == proxyproto.CommandProxy, true)
	}
	return rep
}

// addrPort returns a net.Addr's IP address and port, IPv4-mapped addresses
// unmapped, or the zero value.
func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return clip(a.String())
}
