package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/gateway"
)

// trustFileRanges is the name of -proxy-trusted-file's set in the MQTT
// chain's trust store; its changes are logged under it.
const trustFileRanges = "proxy-trusted-file"

// maxConfigFileBytes bounds the files the flags name (-proxy-trusted-file,
// -topic-policy).
const maxConfigFileBytes = 1 << 20

// readConfigFile reads a file a flag names, refusing one larger than
// maxConfigFileBytes.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxConfigFileBytes)
	}
	return b, nil
}

// readTrustFile reads a list of load balancers: one address or CIDR prefix
// per line, '#' comments, as clientip/ranges reads a plain CIDR list. A file
// without any entry is the empty set: it trusts no load balancer.
//
// It returns ctx's error when ctx is done first: the file may be a pipe
// (-proxy-trusted-file <(…), or a named pipe) whose open or read waits for
// a writer that never comes, and a shutdown signal must not wait for it.
// The read left behind ends with the process.
func readTrustFile(ctx context.Context, path string) (clientip.PrefixSet, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := readConfigFile(path)
		done <- read{b, err}
	}()
	var r read
	select {
	case r = <-done:
	case <-ctx.Done():
		return clientip.PrefixSet{}, fmt.Errorf("%s: not read before the gateway was stopped: %w", path, context.Cause(ctx))
	}
	b, err := r.b, r.err
	if err != nil {
		return clientip.PrefixSet{}, err
	}
	set, err := ranges.ParseCIDRList(b)
	if errors.Is(err, ranges.ErrEmpty) {
		return clientip.PrefixSet{}, nil
	}
	if err != nil {
		return clientip.PrefixSet{}, fmt.Errorf("%s: %w", path, err)
	}
	return set, nil
}

// installTrustFile puts the load balancers of -proxy-trusted-file in the
// MQTT chain's trust, beside -proxy-trusted; the store logs the change as a
// diff. The MQTT chain reads no header, so no set of load balancers makes
// its configuration invalid.
func installTrustFile(g *gateway.Gateway, set clientip.PrefixSet) error {
	_, err := g.MQTTTrust().SetRanges(trustFileRanges, set)
	return err
}

// reloadTrustFile re-reads path on SIGHUP and installs it: a file that
// cannot be read or parsed is logged, and the trust in force stays.
func reloadTrustFile(ctx context.Context, g *gateway.Gateway, path string, log *slog.Logger) {
	log.Info("SIGHUP: reloading -proxy-trusted-file", "path", path)
	set, err := readTrustFile(ctx, path)
	if err == nil {
		warnWideTrust(log, "-proxy-trusted-file", set)
		err = installTrustFile(g, set)
	}
	if err != nil {
		log.Error("-proxy-trusted-file not reloaded; the load balancers in force stay", "error", err.Error())
	}
}

// warnWideTrust logs a warning when set, the trusted proxies or load
// balancers a flag names, holds a range no load balancer's addresses need:
// shorter than /8 (IPv4) or /16 (IPv6), reserved space, or an IPv6 prefix
// that carries every IPv4 address (NAT64, 6to4, Teredo), as
// ranges.CheckSet judges a published list (private space allowed: load
// balancers live there). Every client inside such a range can claim any
// address. clientip refuses 0.0.0.0/0 and ::/0 outright; the rest may be
// meant (a lab), so the gateway starts and says so.
func warnWideTrust(log *slog.Logger, flag string, set clientip.PrefixSet) {
	if set.Len() == 0 {
		return
	}
	if err := ranges.CheckSet(set, true); err != nil {
		log.Warn("a trusted range is wider than any load balancer needs: every client inside it can claim any address", "flag", flag, "error", err.Error())
	}
}
