package grpcsourceip_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/grpcsourceip"
	"github.com/sourceip/sourceip/middleware"
	"github.com/sourceip/sourceip/proxyproto"
	"github.com/sourceip/sourceip/ratelimit"
)

// printClient is a unary interceptor placed after grpcsourceip's: like the
// service itself, it reads the Result from the call's context.
func printClient(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if res, ok := clientip.FromContext(ctx); ok {
		fmt.Println("client", res.Client, "from", res.Source, "via", res.Via)
	}
	return handler(ctx, req)
}

// serveHealth serves gRPC's health service on a loopback port with opts,
// and returns a client of it and a function that stops both.
func serveHealth(opts ...grpc.ServerOption) (healthpb.HealthClient, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	return serveHealthOn(lis, nil, opts...)
}

// serveHealthOn is serveHealth on lis, with a client that dials with dialer
// (net.Dialer's when nil).
func serveHealthOn(lis net.Listener, dialer func(context.Context, string) (net.Conn, error), opts ...grpc.ServerOption) (healthpb.HealthClient, func()) {
	srv := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	dial := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if dialer != nil {
		dial = append(dial, grpc.WithContextDialer(dialer))
	}
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), dial...)
	if err != nil {
		panic(err)
	}
	return healthpb.NewHealthClient(cc), func() { cc.Close(); srv.Stop() }
}

func Example() {
	// The server trusts its proxy, here 127.0.0.1, to write X-Forwarded-For;
	// gRPC carries it as the x-forwarded-for metadata.
	resolver, err := clientip.New(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"),
		Header:         "X-Forwarded-For",
	})
	if err != nil {
		panic(err)
	}
	in, err := grpcsourceip.New(grpcsourceip.Config{Trust: resolver})
	if err != nil {
		panic(err)
	}
	client, stop := serveHealth(grpc.ChainUnaryInterceptor(in.Unary, printClient), grpc.ChainStreamInterceptor(in.Stream))
	defer stop()

	// As a proxy would: the client wrote 6.6.6.6, the proxy appended the
	// address it received the call from. A second value of the key is read
	// as a second header line.
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		"x-forwarded-for", "6.6.6.6", "x-forwarded-for", "203.0.113.7")
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err))

	// A chain that cannot be read is refused, without echoing it.
	ctx = metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", "evil.example")
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err), status.Convert(err).Message())
	// Output:
	// client 203.0.113.7 from x-forwarded-for via 127.0.0.1
	// OK
	// InvalidArgument cannot determine the client address: malformed
}

// A middleware.Policy of method names judges each call by the rule for its
// full method: here the health service admits 192.0.2.0/24 only, and the
// zero Default refuses every other method.
func Example_policy() {
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetNames,
		Rules: []middleware.Rule{
			{Name: "health", Target: "/grpc.health.v1.Health/*", Allow: clientip.MustParsePrefixSet("192.0.2.0/24")},
		},
	})
	if err != nil {
		panic(err)
	}
	in, err := grpcsourceip.New(grpcsourceip.Config{
		Trust:  clientip.MustNew(clientip.Config{}), // clients connect directly
		Policy: policy,
	})
	if err != nil {
		panic(err)
	}
	client, stop := serveHealth(grpc.ChainUnaryInterceptor(in.Unary))
	defer stop()

	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err), status.Convert(err).Message())
	// Output:
	// PermissionDenied client address refused: not_allowed
}

func ExampleCredentials() {
	// The load balancer, here 127.0.0.1, sends a PROXY header; the listener
	// believes it only from there.
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("127.0.0.1/32"),
	})
	lis, err := proxyproto.NewListener(tcp, proxyproto.Config{Trust: trust}) // one trust for both layers
	if err != nil {
		panic(err)
	}
	in, err := grpcsourceip.New(grpcsourceip.Config{Trust: trust})
	if err != nil {
		panic(err)
	}
	// The service, or a later interceptor, also finds the facts and the
	// wrapped credentials' AuthInfo (credentials.TLSInfo under TLS).
	printFacts := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		f, _ := grpcsourceip.FactsFromContext(ctx)
		p, _ := peer.FromContext(ctx)
		fmt.Println("PROXY", f.Version, f.Command, "auth", grpcsourceip.InnerAuthInfo(p.AuthInfo).AuthType())
		return handler(ctx, req)
	}

	// A load balancer's connection: a PROXY v2 header, then gRPC.
	lb := func(ctx context.Context, addr string) (net.Conn, error) {
		return proxyproto.DialContext(ctx, nil, "tcp", addr, proxyproto.Header{
			Version: 2, Command: proxyproto.CommandProxy, Source: netip.MustParseAddrPort("203.0.113.7:5555"),
		})
	}
	client, stop := serveHealthOn(lis, lb,
		grpc.Creds(grpcsourceip.Credentials(insecure.NewCredentials())), // or credentials.NewTLS(cfg)
		grpc.ChainUnaryInterceptor(in.Unary, printClient, printFacts))
	defer stop()
	_, err = client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(status.Code(err))
	// Output:
	// client 203.0.113.7 from proxy-protocol via 127.0.0.1
	// PROXY 2 proxy auth insecure
	// OK
}

func ExampleRateLimit() {
	limiter, err := ratelimit.New(ratelimit.Config{Limit: ratelimit.Limit{Rate: 1, Burst: 1}})
	if err != nil {
		panic(err)
	}
	in, err := grpcsourceip.New(grpcsourceip.Config{
		Trust:     clientip.MustNew(clientip.Config{}),
		RateLimit: grpcsourceip.RateLimit{Store: limiter},
	})
	if err != nil {
		panic(err)
	}
	client, stop := serveHealth(grpc.ChainUnaryInterceptor(in.Unary))
	defer stop()

	for range 2 {
		var trailer metadata.MD
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		fmt.Print(st.Code())
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Print(" retry within 1s: ", ri.GetRetryDelay().AsDuration().Seconds() <= 1)
				fmt.Print(", pushback trailer: ", len(trailer.Get(grpcsourceip.PushbackKey)) == 1)
			}
		}
		fmt.Println()
	}
	// Output:
	// OK
	// ResourceExhausted retry within 1s: true, pushback trailer: true
}
