package clientip

import (
	"errors"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// refOrigin is a slow model of OriginReader.Read written from its
// documentation, independently of the fast code: lists are split with
// strings.Split, syntax is matched with regular expressions, addresses are
// parsed with net/netip. FuzzOrigin holds Read to it.
func refOrigin(cfg OriginConfig, res Result, h http.Header, tls bool, host string) (Origin, error) {
	canon := func(s string) string {
		if s == "" {
			return ""
		}
		return http.CanonicalHeaderKey(s)
	}
	proto, hostH, portH, prefixH := canon(cfg.Proto), canon(cfg.Host), canon(cfg.Port), canon(cfg.Prefix)
	o := Origin{Scheme: "http"}
	if tls {
		o.Scheme = "https"
	}
	if !res.Client.IsValid() {
		return Origin{}, ErrOriginMissing
	}
	allowed := func(h string) bool {
		if len(cfg.AllowedHosts) == 0 {
			return true
		}
		for _, a := range cfg.AllowedHosts {
			if w, ok := strings.CutPrefix(a, "*."); ok {
				parts := strings.SplitN(h, ".", 2)
				if len(parts) == 2 && strings.EqualFold(parts[1], w) {
					return true
				}
				continue
			}
			if ip, err := netip.ParseAddr(strings.Trim(a, "[]")); err == nil && strings.HasPrefix(h, "[") == ip.Is6() {
				if hip, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && hip == ip {
					return true
				}
				continue
			}
			if strings.EqualFold(a, h) {
				return true
			}
		}
		return false
	}
	finish := func(hostText string, headerPort uint16, havePort bool) (Origin, error) {
		hh, port, ok := refHostPort(hostText)
		if !ok {
			return Origin{}, ErrOriginMalformed
		}
		if havePort {
			if port != 0 && port != headerPort {
				return Origin{}, ErrOriginAmbiguous
			}
			port = headerPort
		}
		if o.Scheme == "https" && port == 443 || o.Scheme == "http" && port == 80 {
			port = 0
		}
		o.Host, o.Port = hh, port
		return o, nil
	}

	if !res.Source.FromHeader() {
		if host == "" {
			return Origin{}, ErrOriginMissing
		}
		got, err := finish(host, 0, false)
		if err == nil && !allowed(got.Host) {
			return Origin{}, ErrHostNotAllowed
		}
		return got, err
	}

	k := res.Hop - 1
	if res.Proxy.IsValid() {
		k--
	}
	value := func(name, param string) (string, error) {
		if name == "Forwarded" {
			if res.Source != SourceForwarded {
				return "", ErrOriginMissing
			}
			hops, closed := refForwarded(h["Forwarded"])
			if !closed || k >= len(hops) {
				return "", ErrOriginMissing
			}
			for _, m := range rePairs.FindAllStringSubmatch(hops[k].text, -1) {
				if !strings.EqualFold(m[1], param) {
					continue
				}
				v := m[2]
				if strings.HasPrefix(v, `"`) {
					if strings.Contains(v, `\`) {
						return "", ErrOriginMalformed
					}
					v = v[1 : len(v)-1]
				}
				return v, nil
			}
			return "", ErrOriginMissing
		}
		lines := h[name]
		size := 0
		for _, l := range lines {
			size += len(l) + 1
		}
		if size > DefaultMaxHeaderBytes {
			return "", ErrOriginMalformed
		}
		var list []string
		for _, e := range strings.Split(strings.Join(lines, ","), ",") {
			if e = strings.Trim(e, " \t"); e != "" {
				list = append(list, e)
			}
		}
		switch n := len(list); {
		case n == 0:
			return "", ErrOriginMissing
		case n == 1:
			return list[0], nil
		case n >= k+1:
			return list[n-1-k], nil
		}
		return "", ErrOriginAmbiguous
	}

	if proto != "" {
		v, err := value(proto, "proto")
		if err != nil {
			return Origin{}, err
		}
		switch strings.ToLower(v) {
		case "http", "https":
			o.Scheme = strings.ToLower(v)
		default:
			return Origin{}, ErrOriginMalformed
		}
	}
	hostText := host
	if hostH != "" {
		v, err := value(hostH, "host")
		if err != nil {
			return Origin{}, err
		}
		hostText = v
	} else if host == "" {
		return Origin{}, ErrOriginMissing
	}
	if _, _, ok := refHostPort(hostText); !ok {
		return Origin{}, ErrOriginMalformed // the host is judged before the port header
	}
	var headerPort uint16
	havePort := false
	if portH != "" {
		v, err := value(portH, "")
		switch {
		case errors.Is(err, ErrOriginMissing):
		case err != nil:
			return Origin{}, err
		default:
			n, _ := strconv.Atoi(v)
			if !reRefPort.MatchString(v) || n > 65535 {
				return Origin{}, ErrOriginMalformed
			}
			headerPort, havePort = uint16(n), true
		}
	}
	got, err := finish(hostText, headerPort, havePort)
	if err != nil {
		return Origin{}, err
	}
	if prefixH != "" && len(h[prefixH]) > 0 {
		lines := h[prefixH]
		v := strings.Trim(lines[0], " \t")
		switch {
		case len(lines) > 1 || strings.Contains(v, ","):
			return Origin{}, ErrOriginAmbiguous
		case v == "":
		case len(v) > maxPrefixLen || !reRefPrefix.MatchString(v):
			return Origin{}, ErrOriginMalformed
		default:
			for _, seg := range strings.Split(v, "/") {
				if seg == "." || seg == ".." {
					return Origin{}, ErrOriginMalformed
				}
			}
			got.Prefix = strings.TrimSuffix(v, "/")
		}
	}
	if !allowed(got.Host) {
		return Origin{}, ErrHostNotAllowed
	}
	return got, nil
}

var (
	reRefLabel    = `[A-Za-z0-9_-]{1,63}`
	reRefName     = regexp.MustCompile(`^` + reRefLabel + `(?:\.` + reRefLabel + `)*$`)
	reRefNumeric  = regexp.MustCompile(`(?:^|\.)(?:[0-9]+|0[xX][0-9A-Fa-f]*)$`)
	reRefPort     = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)
	reRefHostPort = regexp.MustCompile(`^(\[[^\]]*\]|[^:\[\]]*)(?::([^:]*))?$`)
	reRefPrefix   = regexp.MustCompile(`^(?:/[A-Za-z0-9\-._~!$&'()*+=:@]+)*/?$`)
)

// refHostPort is the model of parseHostPort: the canonical host and its
// port (0 when none).
func refHostPort(s string) (string, uint16, bool) {
	m := reRefHostPort.FindStringSubmatch(s)
	if m == nil {
		return "", 0, false
	}
	var port uint16
	if strings.Contains(s[len(m[1]):], ":") {
		if !reRefPort.MatchString(m[2]) {
			return "", 0, false
		}
		n, _ := strconv.Atoi(m[2])
		if n > 65535 {
			return "", 0, false
		}
		port = uint16(n)
	}
	h := m[1]
	switch {
	case strings.HasPrefix(h, "["):
		a, err := netip.ParseAddr(h[1 : len(h)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", 0, false
		}
		return "[" + a.String() + "]", port, true
	case reRefNumeric.MatchString(h):
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is4() || a.String() != h {
			return "", 0, false
		}
		return h, port, true
	case len(h) > maxHostLen || !reRefName.MatchString(h):
		return "", 0, false
	}
	return strings.ToLower(h), port, true
}

// originKind names the origin sentinel err wraps, or what else it is, for
// comparing errors with the model's.
func originKind(err error) string {
	for _, e := range []error{ErrOriginMalformed, ErrOriginAmbiguous, ErrOriginMissing, ErrHostNotAllowed} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "none"
}
