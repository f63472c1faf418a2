package ranges

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"unicode/utf8"

	"github.com/sourceip/sourceip/clientip"
)

// ParseCIDRList parses a plain list of prefixes, one a line, such as
// Cloudflare's https://www.cloudflare.com/ips-v4 and /ips-v6 or a file an
// operator maintains. A line may end in \n or \r\n (the last line may have
// neither); '#' starts a comment that runs to the end of the line; blank lines
// and the spaces and tabs around an entry are ignored. An entry is a CIDR
// prefix of either family, or a bare address that stands for one host.
//
// The parser is strict: a document larger than [MaxCIDRListBytes], text that
// is not UTF-8, an HTML page (what a failing CDN serves in place of the
// list), a line with more than one entry, and any entry that is not a
// canonical prefix — host bits set, a zone, a bad length, leading zeros — is
// an error that names the line. Duplicates collapse. A list without a single
// prefix is [ErrEmpty].
func ParseCIDRList(b []byte) (clientip.PrefixSet, error) {
	if err := checkSize(b, MaxCIDRListBytes, "CIDR list"); err != nil {
		return clientip.PrefixSet{}, err
	}
	b = bytes.TrimPrefix(b, utf8BOM)
	if !utf8.Valid(b) {
		return clientip.PrefixSet{}, fmt.Errorf("%w: CIDR list is not UTF-8 text", ErrMalformed)
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '<' {
		return clientip.PrefixSet{}, fmt.Errorf("%w: CIDR list starts with '<': an HTML or XML page, not a list", ErrMalformed)
	}
	var ps []netip.Prefix
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = bytes.Trim(line, " \t")
		if len(line) == 0 {
			continue
		}
		entry := string(line)
		if bytes.ContainsAny(line, " \t") {
			return clientip.PrefixSet{}, fmt.Errorf("%w: line %d: %q: one prefix per line", ErrMalformed, n, truncate(entry))
		}
		p, reason := parsePrefix(entry, anyFamily, true)
		if reason != "" {
			return clientip.PrefixSet{}, invalidEntry("line "+strconv.Itoa(n), entry, reason)
		}
		ps = append(ps, p)
	}
	return finish(ps, "CIDR list has no entries")
}
