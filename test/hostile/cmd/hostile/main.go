// Command hostile serves the hostile test server (package hostile) on
// loopback, for trying slaprobe against it by hand:
//
//	go run ./test/hostile/cmd/hostile --listen 127.0.0.1:8099 --elsewhere http://127.0.0.1:8098
//
// then point targets at http://127.0.0.1:8099/bigchunks, /hugeline, /noline, /headers, /drip, /gzip,
// /redirect-chat (and the other /redirect-*), /ok.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/slaprobe/slaprobe/test/hostile"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8099", "address to serve on")
	elsewhere := flag.String("elsewhere", "http://127.0.0.1:8098", "where /redirect-*/ points")
	flag.Parse()
	log.Printf("hostile server on http://%s", *listen)
	log.Fatal(http.ListenAndServe(*listen, &hostile.Server{Elsewhere: *elsewhere}))
}
