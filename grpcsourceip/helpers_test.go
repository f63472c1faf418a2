package grpcsourceip

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sourceip/sourceip/clientip"
)

// testService answers every call with what the interceptor resolved, as
// describe renders it.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (testService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: []byte(describe(ctx))}}, nil
}

func (testService) StreamingOutputCall(_ *testgrpc.StreamingOutputCallRequest, s grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	return s.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: []byte(describe(s.Context()))}})
}

// describe renders the Result in ctx without ports (which the kernel
// chooses), the PROXY facts' version, and the wrapped credentials' type:
// "client=203.0.113.7 source=x-forwarded-for hop=2 via=127.0.0.2
// peer=127.0.0.2 proxy=invalid masq=false pp=0 auth=insecure".
func describe(ctx context.Context) string {
	res, ok := clientip.FromContext(ctx)
	if !ok {
		return "no result"
	}
	f, _ := FactsFromContext(ctx)
	auth := "none"
	if p, ok := peer.FromContext(ctx); ok && p.AuthInfo != nil {
		auth = InnerAuthInfo(p.AuthInfo).AuthType()
	}
	return fmt.Sprintf("client=%s source=%s hop=%d via=%s peer=%s proxy=%s masq=%t pp=%d auth=%s",
		res.Client, res.Source, res.Hop, res.Via, res.Peer.Addr(), res.Proxy.Addr(), res.Masqueraded, f.Version, auth)
}

// newServer returns a gRPC server of the test service with in's
// interceptors and opts.
func newServer(in *Interceptor, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.ChainUnaryInterceptor(in.Unary), grpc.ChainStreamInterceptor(in.Stream))
	srv := grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(srv, testService{})
	return srv
}

// serve serves the test service on lis with in's interceptors and opts; the
// server stops when the test ends.
func serve(t testing.TB, lis net.Listener, in *Interceptor, opts ...grpc.ServerOption) {
	t.Helper()
	srv := newServer(in, opts...)
	done := make(chan struct{})
	go func() { srv.Serve(lis); close(done) }()
	t.Cleanup(func() { srv.Stop(); <-done })
}

// listen listens on a free loopback port.
func listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return lis
}

// dial connects to target from the loopback address from (any when ""),
// with creds (insecure when nil); the connection closes when the test ends.
func dial(t testing.TB, target, from string, creds credentials.TransportCredentials) testgrpc.TestServiceClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	d := &net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	cc, err := grpc.NewClient("passthrough:///"+target,
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

// outgoing returns the context of a call carrying the metadata pairs md
// (key, value, key, value, …; a key given twice sends two values, in
// order), ending when the test does or after 10 s.
func outgoing(t testing.TB, md ...string) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, md...)
}

// callUnary makes a unary call carrying md and returns the service's
// answer.
func callUnary(t testing.TB, c testgrpc.TestServiceClient, md ...string) (string, error) {
	resp, err := c.UnaryCall(outgoing(t, md...), &testgrpc.SimpleRequest{})
	return string(resp.GetPayload().GetBody()), err
}

// callStream opens a server stream carrying md and returns its one answer.
func callStream(t testing.TB, c testgrpc.TestServiceClient, md ...string) (string, error) {
	s, err := c.StreamingOutputCall(outgoing(t, md...), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		return "", err
	}
	resp, err := s.Recv()
	return string(resp.GetPayload().GetBody()), err
}

// testTLS returns a server and a client TLS configuration for a
// certificate valid for 127.0.0.1: the one net/http/httptest serves.
func testTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	ts.Close()
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	return &tls.Config{Certificates: ts.TLS.Certificates}, &tls.Config{RootCAs: roots}
}

// fields returns the fields of a describe line, by name.
func fields(line string) map[string]string {
	m := make(map[string]string)
	for f := range strings.FieldsSeq(line) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}
