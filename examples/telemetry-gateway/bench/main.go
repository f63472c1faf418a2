// Command bench runs the telemetry gateway and mosquitto side by side under
// the same Go client and prints what each achieved: QoS 1 readings per
// second, p50 and p99 acknowledgement latency, and memory per idle TLS
// connection.
//
//	cd examples && go run ./telemetry-gateway/bench            # the README's figures
//	go run ./telemetry-gateway/bench -rounds 1 -idle 1000      # a quick look
//
// Each broker runs as its own process on loopback, started afresh for every
// measurement; runs are interleaved (gateway, mosquitto, gateway, …) and
// every figure is the median of -rounds runs, so that a machine shared with
// other work disturbs both alike. The gateway is the command itself, built
// from this module (or -gateway-bin), behind a PROXY-protocol load balancer
// that the client plays (a PROXY v2 header on each connection, as deployed);
// mosquitto (-mosquitto; Debian's package) gets none, and runs without
// persistence: it acknowledges a QoS 1 message once it has read it, while
// the gateway acknowledges once the reading is durable.
//
// Scenarios: "window" is -conns connections with -inflight readings in
// flight each (-messages in all); "devices" is -devices connections with one
// reading in flight each, as devices that wait for each acknowledgement.
// Both print readings per second, p50 and p99 acknowledgement latency and the
// broker's CPU time per reading, with the part of it the kernel spent (on
// loopback that includes delivering the broker's writes to the client).
// "idle" opens -idle TLS connections that send nothing after CONNECT and
// reports what each costs the broker: resident memory (RSS), for the
// gateway Go heap in use and goroutine stacks, and the broker's CPU time per
// connection from the first handshake to the measurement (handshakes,
// CONNECT and what the collector did meanwhile). It raises RLIMIT_NOFILE and
// connects from distinct 127.1.x.y addresses.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/pki"
	"github.com/sourceip/sourceip/internal/e2e"
)

type options struct {
	rounds                    int
	targets, scenarios        string
	conns, inflight, messages int
	devices, deviceMessages   int
	idle                      int
	version                   int
	gatewayBin, mosquittoBin  string
	compareBin                string
	natsURL                   string
	pq                        bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 3, "runs of each measurement; figures are medians")
	fs.StringVar(&o.targets, "targets", "gateway,gateway-write,mosquitto", "brokers to compare: gateway (fsync before PUBACK), gateway-write (write(2) before PUBACK), gateway-jetstream (JetStream's acknowledgement before PUBACK; needs -nats-url), mosquitto (no persistence)")
	fs.StringVar(&o.natsURL, "nats-url", "", "gateway-jetstream: the NATS servers; the stream BENCH is created with as many replicas as servers are listed (at most 3)")
	fs.StringVar(&o.scenarios, "scenarios", "window,devices,idle", "what to measure: window, devices, idle")
	fs.IntVar(&o.conns, "conns", 8, "window: connections")
	fs.IntVar(&o.inflight, "inflight", 16, "window: QoS 1 readings in flight per connection")
	fs.IntVar(&o.messages, "messages", 40000, "window: readings in all")
	fs.IntVar(&o.devices, "devices", 1000, "devices: connections, one reading in flight each")
	fs.IntVar(&o.deviceMessages, "device-messages", 40000, "devices: readings in all")
	fs.IntVar(&o.idle, "idle", 10000, "idle: TLS connections held open")
	fs.IntVar(&o.version, "mqtt-version", 4, "MQTT protocol version: 4 (3.1.1) or 5")
	fs.StringVar(&o.gatewayBin, "gateway-bin", "", "the telemetry-gateway binary (default: go build it from this module)")
	fs.StringVar(&o.mosquittoBin, "mosquitto", "mosquitto", "the mosquitto broker")
	fs.StringVar(&o.compareBin, "compare-bin", "", "a second telemetry-gateway binary: each gateway target also runs with it, as NAME@b, in the same interleaved rounds (an A/B of two builds)")
	fs.BoolVar(&o.pq, "pq", false, "offer Go's default TLS key shares, with post-quantum ML-KEM (a ClientHello of ~1.5 kB instead of ~300 bytes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.check(fs); err != nil {
		return err
	}
	raiseFileLimit(o.idle + 1000)
	dir, err := os.MkdirTemp("", "gateway-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ca, err := pki.NewCA("bench CA")
	if err != nil {
		return err
	}
	cert, err := ca.Server("localhost", "127.0.0.1")
	if err != nil {
		return err
	}
	if err := pki.WriteFiles(cert, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")); err != nil {
		return err
	}
	// mosquitto started as root drops to its own user before it reads them:
	// this throwaway key must be readable by it.
	for _, f := range []string{dir, filepath.Join(dir, "server.key")} {
		if err := os.Chmod(f, 0o755); err != nil {
			return err
		}
	}
	var targets []target
	for _, name := range strings.Split(o.targets, ",") {
		switch name {
		case "gateway", "gateway-write":
			if o.gatewayBin == "" {
				if o.gatewayBin, err = buildGateway(dir); err != nil {
					return err
				}
			}
			sync := map[string]string{"gateway": "fsync", "gateway-write": "write"}[name]
			targets = append(targets, gatewayTarget(name, o.gatewayBin, "-sink-sync", sync))
		case "gateway-jetstream":
			if o.natsURL == "" {
				return errors.New("-targets gateway-jetstream needs -nats-url")
			}
			if o.gatewayBin == "" {
				if o.gatewayBin, err = buildGateway(dir); err != nil {
					return err
				}
			}
			replicas := min(len(strings.Split(o.natsURL, ",")), 3)
			targets = append(targets, gatewayTarget(name, o.gatewayBin, "-nats-url", o.natsURL, "-nats-stream", "BENCH",
				"-nats-subject", "bench", "-nats-replicas", fmt.Sprint(replicas)))
		case "mosquitto":
			bin, err := e2e.LookPath(o.mosquittoBin)
			if err != nil {
				return fmt.Errorf("mosquitto: %w (apt-get install mosquitto, or -targets without it)", err)
			}
			targets = append(targets, mosquittoTarget(bin))
		default:
			return fmt.Errorf("-targets: unknown %q", name)
		}
	}
	if o.compareBin != "" {
		targets = withCompared(targets, o.compareBin)
	}
	// X25519 key shares, as device TLS stacks send them: Go's default adds
	// an ML-KEM share of 1,216 bytes, and the ClientHello's size is what
	// the server's handshake buffers keep for the connection's life.
	curves := []tls.CurveID{tls.X25519, tls.CurveP256}
	if o.pq {
		curves = nil
	}
	c := client{tls: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", CurvePreferences: curves}, version: byte(o.version)}
	fmt.Fprintf(out, "machine: %s, %d CPUs, %s; load average %s\n", cpuModel(), runtime.NumCPU(), runtime.Version(), loadAverage())
	kex := "X25519"
	if o.pq {
		kex = "X25519MLKEM768"
	}
	fmt.Fprintf(out, "client: one Go process (mqttload), MQTT %s over TLS 1.3 (%s), QoS 1 readings of ~55 bytes; %d rounds, interleaved; medians\n\n",
		map[int]string{4: "3.1.1", 5: "5"}[o.version], kex, o.rounds)

	for _, sc := range strings.Split(o.scenarios, ",") {
		switch sc {
		case "window":
			fmt.Fprintf(out, "window: %d connections x %d in flight, %d readings\n", o.conns, o.inflight, o.messages)
			if err := runThroughput(ctx, out, c, targets, dir, o.rounds, o.conns, o.inflight, o.messages); err != nil {
				return err
			}
		case "devices":
			fmt.Fprintf(out, "devices: %d connections x 1 in flight, %d readings\n", o.devices, o.deviceMessages)
			if err := runThroughput(ctx, out, c, targets, dir, o.rounds, o.devices, 1, o.deviceMessages); err != nil {
				return err
			}
		case "idle":
			fmt.Fprintf(out, "idle: %d TLS connections after CONNECT, memory per connection\n", o.idle)
			if err := runIdle(ctx, out, c, targets, dir, o.rounds, o.idle); err != nil {
				return err
			}
		default:
			return fmt.Errorf("-scenarios: unknown %q", sc)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "load average at the end: %s\n", loadAverage())
	return nil
}

// withCompared adds after each gateway target its twin running bin, named
// NAME@b, with the same flags.
func withCompared(targets []target, bin string) []target {
	var out []target
	for _, t := range targets {
		out = append(out, t)
		if t.args != nil {
			out = append(out, gatewayTarget(t.name+"@b", bin, t.args...))
		}
	}
	return out
}

// order returns the targets in the order of round r: rotated, so that no
// broker always runs first or after the same one.
func order(targets []target, r int) []target {
	k := r % len(targets)
	return append(slices.Clone(targets[k:]), targets[:k]...)
}

func runThroughput(ctx context.Context, out io.Writer, c client, targets []target, dir string, rounds, conns, inflight, total int) error {
	res, err := interleaved(targets, dir, rounds, func(t target, p *process) (throughput, error) {
		return c.publish(ctx, t, p, conns, inflight, total)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %-18s %12s %10s %10s %9s %9s   %s\n", "broker", "msgs/s", "p50", "p99", "CPU/msg", "sys/msg", "msgs/s of each round")
	for _, t := range targets {
		rs := res[t.name]
		each := make([]string, len(rs))
		for i, r := range rs {
			each[i] = fmt.Sprintf("%.0f", r.rate())
		}
		fmt.Fprintf(out, "  %-18s %12.0f %10s %10s %7.1fµs %7.1fµs   %s\n", t.name,
			median(rs, throughput.rate), durMedian(rs, func(r throughput) time.Duration { return r.p50 }),
			durMedian(rs, func(r throughput) time.Duration { return r.p99 }), median(rs, throughput.cpuPerMsg),
			median(rs, throughput.sysPerMsg), strings.Join(each, " "))
	}
	for _, t := range targets {
		a, ok := strings.CutSuffix(t.name, "@b")
		if !ok {
			continue
		}
		as, bs := res[a], res[t.name]
		for _, m := range []struct {
			what string
			f    func(throughput) float64
		}{{"msgs/s", throughput.rate}, {"CPU/msg", throughput.cpuPerMsg}} {
			ratios := make([]float64, len(bs))
			each := make([]string, len(bs))
			for i := range bs {
				ratios[i] = m.f(bs[i]) / m.f(as[i])
				each[i] = fmt.Sprintf("%.2f", ratios[i])
			}
			fmt.Fprintf(out, "  %s / %s, %s paired by round: median %.2f   %s\n", t.name, a, m.what,
				median(ratios, func(x float64) float64 { return x }), strings.Join(each, " "))
		}
	}
	return nil
}

func runIdle(ctx context.Context, out io.Writer, c client, targets []target, dir string, rounds, n int) error {
	type perConn struct{ rss, heap, stacks, cpu float64 }
	res, err := interleaved(targets, dir, rounds, func(t target, p *process) (perConn, error) {
		time.Sleep(time.Second) // let start-up settle
		before, err := p.usage()
		if err != nil {
			return perConn{}, err
		}
		cs, _, err := c.connect(ctx, t, p, n, 3600)
		if err != nil {
			return perConn{}, err
		}
		defer closeAll(cs)
		time.Sleep(3 * time.Second) // handshakes done, buffers settled, a GC cycle or two
		after, err := p.usage()
		if err != nil {
			return perConn{}, err
		}
		f := float64(n)
		return perConn{float64(after.mem.rss-before.mem.rss) / f, float64(after.mem.heap-before.mem.heap) / f,
			float64(after.mem.stacks-before.mem.stacks) / f, float64(after.cpu.sub(before.cpu).total().Microseconds()) / f}, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %-18s %12s %12s %12s %10s   %s\n", "broker", "RSS/conn", "heap/conn", "stacks/conn", "CPU/conn", "RSS/conn of each round")
	for _, t := range targets {
		rs := res[t.name]
		each := make([]string, len(rs))
		for i, r := range rs {
			each[i] = fmt.Sprintf("%.1f kB", r.rss/1000)
		}
		heap, stacks := "-", "-"
		if rs[0].heap != 0 {
			heap = fmt.Sprintf("%.1f kB", median(rs, func(r perConn) float64 { return r.heap })/1000)
			stacks = fmt.Sprintf("%.1f kB", median(rs, func(r perConn) float64 { return r.stacks })/1000)
		}
		fmt.Fprintf(out, "  %-18s %9.1f kB %12s %12s %8.0fµs   %s\n", t.name, median(rs, func(r perConn) float64 { return r.rss })/1000, heap, stacks,
			median(rs, func(r perConn) float64 { return r.cpu }), strings.Join(each, " "))
	}
	return nil
}

// withProcess starts t, runs f against it and stops it.
// interleaved measures every target rounds times, each in a process of
// its own, the order of the targets changing from round to round, and
// returns each target's measurements by name, in round order.
func interleaved[T any](targets []target, dir string, rounds int, measure func(target, *process) (T, error)) (map[string][]T, error) {
	res := map[string][]T{}
	for r := range rounds {
		for _, t := range order(targets, r) {
			got, err := withProcess(t, dir, func(p *process) (T, error) { return measure(t, p) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			res[t.name] = append(res[t.name], got)
		}
	}
	return res, nil
}

func withProcess[T any](t target, dir string, f func(*process) (T, error)) (T, error) {
	var zero T
	port, err := freePort()
	if err != nil {
		return zero, err
	}
	p, err := t.start(dir, port)
	if err != nil {
		return zero, err
	}
	defer p.stop()
	got, err := f(p)
	select {
	case <-p.exited:
		return zero, fmt.Errorf("exited during the run: %s", p.out)
	default:
	}
	return got, err
}

func median[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func durMedian[T any](xs []T, f func(T) time.Duration) time.Duration {
	return time.Duration(median(xs, func(x T) float64 { return float64(f(x)) })).Round(10 * time.Microsecond)
}

// buildGateway builds the telemetry-gateway command of this module into dir.
func buildGateway(dir string) (string, error) {
	bin := filepath.Join(dir, "telemetry-gateway")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/sourceip/sourceip/examples/telemetry-gateway")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
}

// raiseFileLimit lets this process and the brokers it starts hold n
// descriptors.
func raiseFileLimit(n int) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur >= uint64(n) {
		return
	}
	want := syscall.Rlimit{Cur: uint64(n), Max: max(l.Max, uint64(n))}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// check refuses sizes no measurement can run with, before anything starts.
func (o *options) check(fs *flag.FlagSet) error {
	var errs []error
	atLeast := func(name string, v, min int) {
		if v < min {
			errs = append(errs, fmt.Errorf("-%s %d: want at least %d", name, v, min))
		}
	}
	atLeast("rounds", o.rounds, 1)
	atLeast("conns", o.conns, 1)
	atLeast("inflight", o.inflight, 1)
	atLeast("messages", o.messages, o.conns)
	atLeast("devices", o.devices, 1)
	atLeast("device-messages", o.deviceMessages, o.devices)
	atLeast("idle", o.idle, 1)
	if o.inflight > 65535 {
		errs = append(errs, fmt.Errorf("-inflight %d: want at most 65535, the packet ids there are", o.inflight))
	}
	if o.version != 4 && o.version != 5 {
		errs = append(errs, fmt.Errorf("-mqtt-version %d: want 4 (3.1.1) or 5", o.version))
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	return errors.Join(errs...)
}
