// Command chiclientip is a chi server behind reverse proxies that append
// X-Forwarded-For: the sourceip middleware resolves each request's client
// once, before routing, and an admin route group admits only an office range.
// With -policy it copies no request: the server's ConnContext attaches the
// trust once per connection and a policy of chi routes (policy.go) judges
// each request on demand.
//
//	go run ./chiclientip -addr 127.0.0.1:8080 -trusted 10.0.0.0/8 -office 198.51.100.0/24
//	go run ./chiclientip -policy -trusted 10.0.0.0/8 -office 198.51.100.0/24 -blocked 198.51.100.66
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// newRouter returns the application: the resolve middleware on the whole
// router, a source-range policy on /admin.
func newRouter(trust clientip.Trust, office clientip.PrefixSet, obs middleware.Observer) (http.Handler, error) {
	resolve, err := middleware.New(middleware.Config{Trust: trust, Observer: obs})
	if err != nil {
		return nil, err
	}
	policy, err := middleware.NewSourceRanges(middleware.SourceRangesConfig{Allow: office, Observer: obs})
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Use(resolve) // chi's middleware shape: func(http.Handler) http.Handler
	r.Get("/hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s from %s (%s)\n", chi.URLParam(r, "name"), res.Client, res.Source)
	})
	r.Route("/admin", func(r chi.Router) {
		r.Use(policy.Handler)
		r.Get("/{page}", func(w http.ResponseWriter, r *http.Request) {
			res, _ := clientip.FromContext(r.Context())
			fmt.Fprintf(w, "admin %s for %s\n", chi.URLParam(r, "page"), res.Client)
		})
	})
	return r, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	usePolicy := flag.Bool("policy", false, "resolve on demand, with a policy of chi routes, without request copies")
	var trusted, office, blocked clientip.PrefixSet
	flag.Var(&trusted, "trusted", "trusted reverse proxies (addresses, prefixes, presets; repeatable)")
	flag.Var(&office, "office", "client ranges admitted to /admin (repeatable)")
	flag.Var(&blocked, "blocked", "with -policy: client ranges refused on /hello and /admin/audit (repeatable)")
	flag.Parse()

	resolver, err := clientip.New(clientip.Config{TrustedProxies: trusted, Header: "X-Forwarded-For"})
	if err != nil {
		log.Fatal(err)
	}
	obs := middleware.LogObserver(slog.Default())
	srv := &http.Server{Addr: *addr, ReadHeaderTimeout: 10 * time.Second}
	if *usePolicy {
		srv.Handler, err = newPolicyRouter(office, blocked, obs)
		srv.ConnContext = middleware.ConnContext(resolver)
	} else {
		srv.Handler, err = newRouter(resolver, office, obs)
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.ListenAndServe())
}
