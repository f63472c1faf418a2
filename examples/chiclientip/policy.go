package main

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/middleware"
)

// chiRoute returns the route pattern chi matched ("/admin/{page}"), the
// target of a policy of route names. chi knows it once it has routed, so
// mount the policy where routing is done: on a route with r.With, or in a
// route group. Before routing it is "", which no rule names, and the
// policy's Default decides.
func chiRoute(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		return rc.RoutePattern()
	}
	return ""
}

// newPolicyRouter returns the application without request copies: the
// server's ConnContext (see main) attaches the trust once per connection, a
// policy of chi routes judges each request on demand, and handlers read the
// client with clientip.FromRequest.
func newPolicyRouter(office, blocked clientip.PrefixSet, obs middleware.Observer) (http.Handler, error) {
	everyone := clientip.MustParsePrefixSet("0.0.0.0/0, ::/0")
	policy, err := middleware.NewPolicy(middleware.PolicyConfig{
		Targets: middleware.TargetNames,
		Rules: []middleware.Rule{
			{Name: "hello", Target: "/hello/{name}", Allow: everyone, Deny: blocked},
			{Name: "audit", Target: "/admin/audit", Allow: office, Deny: blocked},
			{Name: "admin", Target: "/admin/*", Allow: office},
		},
		// The Default refuses everyone: a route no rule names is closed.
		Route:    chiRoute,
		Observer: obs,
	})
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.With(policy.Handler).Get("/hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		res, _ := clientip.FromRequest(r)
		fmt.Fprintf(w, "hello %s from %s (%s)\n", chi.URLParam(r, "name"), res.Client, res.Source)
	})
	r.With(policy.Handler).Get("/unlisted", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "no rule names this route")
	})
	r.Route("/admin", func(r chi.Router) {
		// r.Use(policy.Handler) here would run when chi has matched only
		// "/admin/*": the "audit" rule would never apply. On each route,
		// the pattern is whole.
		r = r.With(policy.Handler)
		r.Get("/audit", func(w http.ResponseWriter, r *http.Request) {
			res, _ := clientip.FromRequest(r)
			fmt.Fprintf(w, "audit log for %s\n", res.Client)
		})
		r.Get("/{page}", func(w http.ResponseWriter, r *http.Request) {
			res, _ := clientip.FromRequest(r)
			fmt.Fprintf(w, "admin %s for %s\n", chi.URLParam(r, "page"), res.Client)
		})
	})
	return r, nil
}
