package grpcsourceip

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/metadata"

	"github.com/sourceip/sourceip/clientip"
)

// headerName is a resolver's configured header under both of its names:
// the metadata key gRPC files it under (HTTP/2 field names are lower case)
// and the canonical key the resolver looks up in an http.Header.
type headerName struct {
	r     *clientip.Resolver
	canon string // "X-Forwarded-For"; "" when the resolver reads no header
	key   string // "x-forwarded-for"
}

// headerCache remembers the header names of the last resolver it was asked
// about, so that a [clientip.Trust] that returns the same resolver for
// every RPC costs one pointer comparison, and one that swaps resolvers
// costs two strings per swap. The zero value is ready to use and safe for
// concurrent use.
type headerCache struct {
	last atomic.Pointer[headerName]
}

func (c *headerCache) of(r *clientip.Resolver) *headerName {
	if n := c.last.Load(); n != nil && n.r == r {
		return n
	}
	canon := r.Config().Header
	n := &headerName{r: r, canon: canon, key: strings.ToLower(canon)}
	c.last.Store(n)
	return n
}

// resolve resolves the client of the RPC whose context is ctx with r: the
// connection's layers from [TransportFromContext], then every value of the
// one metadata key that is r's configured header, in the order they
// arrived, as the lines of that header. No other metadata is read.
//
// Each value is a line: gRPC keeps a field that arrives twice as two
// values, and a client that sends a second x-forwarded-for field, or a
// second X-Real-IP, is read exactly as a second header line would be in
// HTTP — merged into the list for X-Forwarded-For and Forwarded, and
// ErrMultipleValues for a single-address header. The header view is an
// http.Header of one key that lives on the stack; the values are the copy
// that metadata.ValueFromIncomingContext makes (one allocation, only when
// the key is present).
func resolve(ctx context.Context, r *clientip.Resolver, names *headerCache) (clientip.Result, error) {
	t, err := TransportFromContext(ctx)
	if err != nil {
		return clientip.Result{}, err
	}
	n := names.of(r)
	if n.canon == "" {
		return r.Resolve(t, nil)
	}
	vals := metadata.ValueFromIncomingContext(ctx, n.key)
	if len(vals) == 0 {
		return r.Resolve(t, nil)
	}
	return r.Resolve(t, http.Header{n.canon: vals})
}
