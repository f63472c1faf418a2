// Command policylab proves what a backend observes under each Kubernetes
// traffic policy, on a real kernel data path: it builds a small cluster in
// Linux network namespaces (two external clients, an L4 passthrough load
// balancer and HAProxy, three nodes with kube-proxy's iptables rules and
// health servers, pods running an echo backend built on clientip and
// proxyproto), sends connections through every path, compares what the
// backend saw at each layer with trafficpolicy's model, and prints a Markdown
// report. It needs root, ip, iptables and haproxy, and removes everything it
// created when it ends, also on Ctrl-C.
//
//	go run ./policylab > report.md
//
// The exit status is 0 when every verdict passes, 1 when one fails or the
// lab cannot run to the end, 2 when the machine lacks what the lab needs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	opt := DefaultOptions()
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `usage: policylab [flags] > report.md

policylab proves what a backend observes under each Kubernetes traffic
policy (externalTrafficPolicy Cluster and Local, behind a passthrough load
balancer and behind HAProxy with and without PROXY protocol) on a real
kernel data path. It builds a small cluster in Linux network namespaces:
clients, the load balancers, three nodes with kube-proxy's iptables rules
and health servers, and pods running an echo backend built on sourceip. It
sends connections through every path, compares what the backend saw at each
layer with the trafficpolicy package's model, and prints a Markdown report
on standard output. It needs root, ip, iptables and haproxy, and removes
everything it created when it ends, also on Ctrl-C. Exit status: 0 when
every verdict passes, 1 when one fails or the lab cannot run to the end, 2
when the machine lacks what the lab needs.

flags:
`)
		flag.PrintDefaults()
	}
	flag.DurationVar(&opt.Timing.Interval, "interval", opt.Timing.Interval, "health-check interval of both load balancers")
	flag.DurationVar(&opt.Timing.Timeout, "timeout", opt.Timing.Timeout, "health-check timeout (at most the interval)")
	flag.IntVar(&opt.Timing.Rise, "rise", opt.Timing.Rise, "successes that bring a node into rotation")
	flag.IntVar(&opt.Timing.Fall, "fall", opt.Timing.Fall, "failures that take a node out of rotation")
	flag.IntVar(&opt.Conns, "conns", opt.Conns, "connections per scenario row")
	flag.IntVar(&opt.SkewConns, "skew-conns", opt.SkewConns, "connections for the skew measurement")
	flag.BoolVar(&opt.IPv6, "ipv6", opt.IPv6, "add IPv6 clients where the kernel path allows")
	verbose := flag.Bool("v", false, "report progress on standard error")
	flag.Parse()
	if *verbose {
		start := time.Now()
		opt.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%6.2fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
		}
	}
	if err := prerequisites(); err != nil {
		fmt.Fprintln(os.Stderr, "policylab:", err)
		os.Exit(2)
	}
	// A closed standard output or error (| head) must not kill the lab
	// before it has removed its namespaces: writes fail with EPIPE instead.
	signal.Ignore(syscall.SIGPIPE)
	// Run catches SIGINT, SIGTERM and SIGHUP itself.
	rep, err := Run(context.Background(), opt)
	rep.Markdown(os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "policylab:", err)
		os.Exit(1)
	}
	if !rep.Passed() {
		for _, f := range rep.Failures() {
			fmt.Fprintln(os.Stderr, "policylab: FAIL", f)
		}
		os.Exit(1)
	}
}
