// Package trafficpolicy tells a backend behind a Kubernetes Service what it
// will see of its clients, and helps it take part in the load balancer's
// health checking: a model of Service traffic policies, a health server
// compatible with kube-proxy's healthCheckNodePort, and a prober that
// behaves like a load balancer.
//
// # The model
//
// A [Case] is one question: a Service's type, externalTrafficPolicy,
// internalTrafficPolicy, trafficDistribution and load-balancer ipMode; the
// caller's [Path] (an external client through the load balancer or straight
// to a node port, a pod to the cluster IP or to the load-balancer IP); the
// [LBKind] in front (L4 passthrough, L4 proxy with PROXY protocol, L4
// passthrough that adds a PROXY header too, L7 adding X-Forwarded-For, or a
// full proxy that passes nothing on); and whether the
// node the traffic enters has a local endpoint. [Expect] answers it as an
// [Expectation]: whether the connection is delivered, dropped or not exposed
// at all; which [Peer] the backend's socket sees (client, node, load
// balancer); in which layer the client's address survives (socket, PROXY
// header, X-Forwarded-For) or that it is lost; which endpoints may serve it;
// what health-checks the node; and the clientip recipe, which
// [Expectation.Config] turns into a [clientip.Config] from the node and
// load-balancer addresses you supply in a [Network]. Every answer cites the
// kube-proxy rule it rests on.
//
// The rules are those of kube-proxy's iptables mode (the nftables mode has
// the same semantics), in short:
//
//   - externalTrafficPolicy Cluster masquerades node-port and load-balancer
//     traffic to the node, so the client survives only in a PROXY header or
//     X-Forwarded-For, which the backend can believe only by trusting every
//     node — and then anyone who reaches a node port can forge it.
//   - externalTrafficPolicy Local keeps the source, serves only node-local
//     endpoints, and drops traffic on nodes without one; load balancers keep
//     away from those nodes by probing healthCheckNodePort.
//   - Pods calling a load-balancer IP in VIP mode never reach the load
//     balancer: kube-proxy captures the IP on their own node, so no PROXY
//     header or X-Forwarded-For is added. With ipMode Proxy they really go
//     through it.
//   - internalTrafficPolicy Local restricts pods to their node's endpoints
//     and drops their connections when there is none.
//   - trafficDistribution narrows which endpoint serves a Cluster-policy
//     connection and never changes an address.
//
// [Service] describes a Service for the model; [Service.Matrix] asks every
// question it raises and [FullMatrix] is the reference table. Reading Service
// manifests (YAML or JSON) and rendering the answers as a Markdown table live
// in the trafficpolicy/manifest module, so that this package needs no YAML
// parser: it imports only the standard library, clientip and proxyproto.
//
// Outside the model: load balancers that target pod IPs directly (their
// traffic never enters KUBE-EXT, so the policies do not apply), host-network
// callers (masqueraded when they call a load-balancer IP), Services with
// allocateLoadBalancerNodePorts false, and kube-proxy replacements (Cilium,
// Calico eBPF) that may differ in detail.
//
// # Health checks
//
// A [HealthServer] answers health checks exactly as kube-proxy does on a
// Service's healthCheckNodePort — status rule, headers and JSON body — from
// a [Registry] of local endpoints that the caller keeps up to date, and an
// optional proxy-health function. Terminating endpoints do not count, so a
// node drains before its last pod is gone. Load balancers configured for
// kube-proxy can probe it instead: in node-local gateways, behind bare-metal
// load balancers, in labs.
//
// A [NodeHealthServer] answers :10256/healthz and /livez as kube-proxy does
// (KEP-3836): proxier health per IP family, node eligibility from the
// caller's view of its Node object, and [DataPathCheck]s for what
// kube-proxy cannot see. Load balancers of Cluster-policy Services probe it;
// [GCPNodeProbe], [AWSNodeProbe] and [AzureNodeProbe] say where and how
// often.
//
// A HealthServer is an [http.Handler] and runs on any listener. Load
// balancers that put a PROXY header in front of their health checks (AWS
// NLB with proxy protocol v2, HAProxy with send-proxy and check-send-proxy)
// need a listener that accepts one, while other checkers send none:
// [OptionalProxyHeader] is the proxyproto listener's optional-header mode,
// which reads, validates and discards a v1 or v2 header when there is one,
// with a bounded wait and bounded sizes. It trusts no upstream, so it never
// believes the header's addresses, which a health answer does not need;
// listeners whose clients' addresses matter are proxyproto listeners with
// the load balancers as trusted upstreams.
//
// # Probing
//
// A [Prober] checks health endpoints with an interval, a timeout and rise
// and fall thresholds, as HAProxy or a cloud load balancer does, and reports
// membership changes with timestamps. Its state machine,
// [Prober.ObserveAt], takes the time as an argument, so a test can replay
// any sequence of results; [Prober.Run] drives it with real HTTP probes.
// [Timing.BlackHole] predicts how long a load balancer keeps sending new
// connections to a node after its last local endpoint goes away (interval ×
// fall, give or take one interval), and [Timing.Rejoin] how long a node
// whose endpoint came back stays unused. [HAProxyTiming], [AWSNLBTiming],
// [AWSLBCTiming], [GCPTiming] and [AzureTiming] hold the load balancers'
// defaults.
//
// # Concurrency
//
// [Expect] and [Service.Matrix] are pure functions of their arguments.
// [Registry], [HealthServer], [NodeHealthServer] and [Prober] are safe for
// concurrent use.
package trafficpolicy
