// Command policylab proves what a backend observes under each Kubernetes
// traffic policy, on a real kernel data path and with the real kube-proxy:
// it builds a small cluster in Linux network namespaces (two external
// clients, an L4 passthrough load balancer and HAProxy, three nodes each
// running kube-proxy's own proxier and health servers from
// k8s.io/kubernetes, pods running an echo backend built on clientip and
// proxyproto), sends connections through every path under kube-proxy's
// iptables and nftables modes in turn, compares what the backend saw at
// each layer with trafficpolicy's model, compares trafficpolicy's health
// servers with kube-proxy's answer for answer, and writes a Markdown report
// with SVG charts beside it. It needs root, ip, iptables, nft and haproxy,
// and removes everything it created when it ends, also on Ctrl-C.
//
//	go run . -o report.md
//
// The exit status is 0 when every verdict passes, 1 when one fails or the
// lab cannot run to the end, 2 when the machine lacks what the lab needs.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sourceip/sourceip/examples/policylab/internal/kubeproxy"
	"github.com/sourceip/sourceip/examples/policylab/internal/lab"
	"github.com/sourceip/sourceip/examples/policylab/internal/report"
	"github.com/sourceip/sourceip/internal/version"
)

func main() {
	// The lab starts this executable again in every node's namespace to run
	// kube-proxy there.
	kubeproxy.AgentMain()
	opt := lab.DefaultOptions()
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `usage: policylab [flags]

policylab proves what a backend observes under each Kubernetes traffic
policy (externalTrafficPolicy Cluster and Local, behind a passthrough load
balancer and behind HAProxy with and without PROXY protocol) on a real
kernel data path. It builds a small cluster in Linux network namespaces:
clients, the load balancers, three nodes each running the real kube-proxy
(k8s.io/kubernetes' proxier and health servers, in iptables and nftables
mode) beside sourceip's own health servers, and pods running an echo backend
built on sourceip. It sends connections through every path, compares what
the backend saw at each layer with the trafficpolicy package's model, and
writes a Markdown report with SVG charts (-o). It needs root, ip, iptables,
nft and haproxy, and removes everything it created when it ends, also on
Ctrl-C. Exit status: 0 when every verdict passes, 1 when one fails or the
lab cannot run to the end, 2 when the machine lacks what the lab needs.

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
	modes := flag.String("modes", "iptables,nftables", "kube-proxy modes to run every scenario under, comma-separated")
	out := flag.String("o", "report.md", `the Markdown report's file, with its SVG charts written beside it; "-" writes the Markdown to standard output and no charts`)
	verbose := flag.Bool("v", false, "report progress on standard error")
	showVersion := flag.Bool("version", false, "print the version this program was built from and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("policylab", version.String())
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "policylab: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	opt.Modes = nil
	for _, m := range strings.Split(*modes, ",") {
		opt.Modes = append(opt.Modes, kubeproxy.Mode(strings.TrimSpace(m)))
	}
	if err := opt.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "policylab:", err)
		flag.Usage()
		os.Exit(2)
	}
	if *verbose {
		start := time.Now()
		opt.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%6.2fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
		}
	}
	if err := lab.Prerequisites(opt.Modes); err != nil {
		fmt.Fprintln(os.Stderr, "policylab:", err)
		os.Exit(2)
	}
	// A closed standard output or error (| head) must not kill the lab
	// before it has removed its namespaces: writes fail with EPIPE instead.
	signal.Ignore(syscall.SIGPIPE)
	// Run catches SIGINT, SIGTERM and SIGHUP itself.
	rep, err := lab.Run(context.Background(), opt)
	if werr := write(rep, *out, os.Stdout); werr != nil {
		fmt.Fprintln(os.Stderr, "policylab:", werr)
		os.Exit(1)
	}
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

// write writes the report to path, its charts beside it, or the Markdown
// alone to stdout for "-".
func write(rep *report.Report, path string, stdout io.Writer) error {
	if path == "-" {
		var md bytes.Buffer
		rep.Markdown(&md, nil)
		if _, err := stdout.Write(md.Bytes()); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		return nil
	}
	names, err := report.WriteFiles(rep, path)
	if err == nil {
		fmt.Fprintf(os.Stderr, "policylab: wrote %s and %d charts\n", path, len(names))
	}
	return err
}
