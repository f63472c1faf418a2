package redisstore_test

import (
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/ratelimit"
	"github.com/sourceip/sourceip/ratelimit/redisstore"
)

// Three replicas of a service behind a load balancer share one limit per
// client: 20 requests at once, then 10 a second.
func Example() {
	trust := clientip.MustNew(clientip.Config{
		TrustedProxies: clientip.MustParsePrefixSet("10.0.0.0/8"), // the load balancer
		Header:         "X-Forwarded-For",
	})
	limit := ratelimit.Limit{Rate: 10, Burst: 20}
	store, err := redisstore.New(redisstore.Config{
		Client: redis.NewClient(redisstore.Options("redis:6379")),
		Limit:  limit,
		Prefix: "api:",
		// While Redis is unreachable, each of the three replicas allows a
		// third of the limit on its own.
		FallbackLimit: limit.Split(3),
	})
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := ratelimit.NewHTTP(ratelimit.HTTPConfig{Trust: trust, Store: store, Name: "api"})
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/", limiter.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello\n"))
	})))
	log.Fatal(http.ListenAndServe(":8080", nil))
}
