// Command ginclientip shows sourceip in a gin application. Gin has its own
// handler type, so instead of the net/http middleware it calls the resolver
// on the request, in a gin middleware that stores the result in the request
// context (where clientip.FromContext and net/http code find it) and refuses
// unresolvable chains.
//
// Do not combine it with gin's c.ClientIP(): gin trusts every proxy unless
// SetTrustedProxies says otherwise, and then takes addresses from headers a
// client can write. The engine here trusts no proxy, so c.ClientIP() can only
// ever return the socket peer.
//
//	go run ./ginclientip -addr 127.0.0.1:8080 -trusted 10.0.0.0/8
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sourceip/sourceip/clientip"
)

// Resolve returns a gin middleware that resolves the client once per request,
// with the resolver trust has in force (a *clientip.Resolver, or a
// *clientip.Store changed while serving), and stores the Result in the
// request context; an unresolvable chain is answered with 400 and a short
// reason, never a guess.
func Resolve(trust clientip.Trust) gin.HandlerFunc {
	return func(c *gin.Context) {
		res, err := trust.Resolver().ResolveRequest(c.Request)
		if err != nil && !res.Masqueraded {
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "cannot determine the client address"})
			return
		}
		c.Request = c.Request.WithContext(clientip.NewContext(c.Request.Context(), res))
		c.Next()
	}
}

// Client returns the Result Resolve stored.
func Client(c *gin.Context) (clientip.Result, bool) {
	return clientip.FromContext(c.Request.Context())
}

func newEngine(trust clientip.Trust) (*gin.Engine, error) {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	if err := e.SetTrustedProxies(nil); err != nil { // gin's own extraction off
		return nil, err
	}
	e.Use(Resolve(trust))
	e.GET("/whoami", func(c *gin.Context) {
		res, _ := Client(c)
		c.JSON(http.StatusOK, gin.H{"client": res.Client.String(), "source": res.Source.String()})
	})
	return e, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	var trusted clientip.PrefixSet
	flag.Var(&trusted, "trusted", "trusted reverse proxies (repeatable)")
	flag.Parse()
	r, err := clientip.New(clientip.Config{TrustedProxies: trusted, Header: "X-Forwarded-For"})
	if err != nil {
		log.Fatal(err)
	}
	e, err := newEngine(r)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(e.Run(*addr))
}
