package grpcsourceip

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/sourceip/sourceip/proxyproto"
)

// Credentials wraps a server's transport credentials — insecure, TLS, or any
// other — so that a connection accepted from a [proxyproto.Listener] keeps
// its PROXY protocol facts. gRPC gives interceptors the connection's
// addresses and its credentials' [credentials.AuthInfo], never the connection
// itself: the wrapper's ServerHandshake sees the raw connection the listener
// handed out, reads its [proxyproto.Facts] with [proxyproto.FactsFromConn],
// lets inner do its handshake on the same connection, and returns an
// [AuthInfo] that carries both the facts and inner's AuthInfo.
//
//	srv := grpc.NewServer(
//		grpc.Creds(grpcsourceip.Credentials(insecure.NewCredentials())), // or credentials.NewTLS(cfg)
//		grpc.ChainUnaryInterceptor(in.Unary),
//		grpc.ChainStreamInterceptor(in.Stream),
//	)
//	srv.Serve(proxyListener) // a *proxyproto.Listener
//
// Serve the raw proxyproto.Listener, not a tls.NewListener around it: the
// TLS handshake is inner's (credentials.NewTLS), done inside the wrapper.
//
// Without the wrapper, gRPC's peer address on such a connection is the PROXY
// source ([proxyproto.Conn.RemoteAddr]) taken for the socket peer: the load
// balancer drops out of the chain. In hop-count mode
// (clientip.Config.TrustedHops) it counts one hop fewer and would name a
// header entry the client wrote; and a connection on which the load balancer
// names no client (a LOCAL header, or no header from one of
// proxyproto.Config.Upstreams) has the load balancer as its peer, which the
// walk passes into forwarding metadata the client wrote instead of ending
// there. See the package documentation.
//
// The client side is inner's unchanged: ClientHandshake, Info, Clone and
// OverrideServerName delegate to it. A nil inner is not valid.
func Credentials(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &creds{inner: inner}
}

type creds struct {
	inner credentials.TransportCredentials
}

// ServerHandshake reads the facts of rawConn before inner's handshake, which
// may replace the connection (a *tls.Conn): FactsFromConn sees through one,
// but reading first keeps the answer independent of what inner returns.
func (c *creds) ServerHandshake(rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	f, proxied := proxyproto.FactsFromConn(rawConn)
	conn, ai, err := c.inner.ServerHandshake(rawConn)
	if err != nil {
		return conn, ai, err
	}
	return conn, AuthInfo{Inner: ai, Facts: f, Proxied: proxied}, nil
}

func (c *creds) ClientHandshake(ctx context.Context, authority string, rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.inner.ClientHandshake(ctx, authority, rawConn)
}

func (c *creds) Info() credentials.ProtocolInfo { return c.inner.Info() }

func (c *creds) Clone() credentials.TransportCredentials {
	return &creds{inner: c.inner.Clone()}
}

func (c *creds) OverrideServerName(name string) error {
	return c.inner.OverrideServerName(name)
}

// AuthInfo is the [credentials.AuthInfo] of a connection that [Credentials]
// handshook: the wrapped credentials' own AuthInfo and, for a connection
// from a [proxyproto.Listener], its PROXY facts. Interceptors find it in
// [peer.Peer].AuthInfo; the [Interceptor] resolves from it.
//
// Application code that asserted the AuthInfo's type before the wrapper was
// added reaches the wrapped one through Inner, or with [InnerAuthInfo]
// whether the wrapper is there or not:
//
//	p, _ := peer.FromContext(ctx)
//	tlsInfo, ok := grpcsourceip.InnerAuthInfo(p.AuthInfo).(credentials.TLSInfo)
//	facts, proxied := grpcsourceip.FactsFromPeer(p)
//
// AuthType, and the security level that gRPC checks per-RPC credentials
// against, are Inner's.
type AuthInfo struct {
	// Inner is the AuthInfo the wrapped credentials returned:
	// credentials.TLSInfo for credentials.NewTLS, an AuthInfo of type
	// "insecure" for insecure.NewCredentials.
	Inner credentials.AuthInfo

	// Facts are the connection's layers as the proxyproto.Listener read
	// them: the load balancer as the socket peer, the PROXY header's source
	// and destination, its TLVs. They are the zero value unless Proxied.
	Facts proxyproto.Facts

	// Proxied reports that the connection came from a proxyproto.Listener
	// (directly or wrapped), so Facts describe it — also when it carried no
	// PROXY header (Facts.Command is then CommandNone).
	Proxied bool
}

// AuthType returns Inner's AuthType ("tls", "insecure", …), or
// "grpcsourceip" when Inner is nil.
func (a AuthInfo) AuthType() string {
	if a.Inner == nil {
		return "grpcsourceip"
	}
	return a.Inner.AuthType()
}

// GetCommonAuthInfo returns Inner's security level, so that gRPC's checks
// of per-RPC credentials (credentials.CheckSecurityLevel) see the wrapped
// credentials' level and not an unknown one. An Inner without one reports
// the zero CommonAuthInfo (credentials.InvalidSecurityLevel), which those
// checks treat as "not known" and let pass, as they would Inner itself.
func (a AuthInfo) GetCommonAuthInfo() credentials.CommonAuthInfo {
	if ci, ok := a.Inner.(interface {
		GetCommonAuthInfo() credentials.CommonAuthInfo
	}); ok {
		return ci.GetCommonAuthInfo()
	}
	return credentials.CommonAuthInfo{}
}

// GetSecurityValue returns Inner's channelz security value, if it has one.
func (a AuthInfo) GetSecurityValue() credentials.ChannelzSecurityValue {
	if cs, ok := a.Inner.(credentials.ChannelzSecurityInfo); ok {
		return cs.GetSecurityValue()
	}
	return nil
}

// InnerAuthInfo returns the AuthInfo that the credentials inside
// [Credentials] returned when ai is an [AuthInfo], and ai itself otherwise,
// so that code asserting credentials.TLSInfo works with and without the
// wrapper.
func InnerAuthInfo(ai credentials.AuthInfo) credentials.AuthInfo {
	if a, ok := ai.(AuthInfo); ok {
		return a.Inner
	}
	return ai
}

// FactsFromPeer returns the PROXY facts of p's connection when it came from
// a proxyproto.Listener through [Credentials]. It does not allocate.
func FactsFromPeer(p *peer.Peer) (proxyproto.Facts, bool) {
	if p == nil {
		return proxyproto.Facts{}, false
	}
	a, ok := p.AuthInfo.(AuthInfo)
	if !ok || !a.Proxied {
		return proxyproto.Facts{}, false
	}
	return a.Facts, true
}

// FactsFromContext returns the PROXY facts of the connection an RPC came on,
// as [FactsFromPeer] does for the peer in ctx; an interceptor or a handler
// calls it with the RPC's context. It does not allocate.
func FactsFromContext(ctx context.Context) (proxyproto.Facts, bool) {
	p, _ := peer.FromContext(ctx)
	return FactsFromPeer(p)
}
