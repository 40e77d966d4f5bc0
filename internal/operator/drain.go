package operator

import (
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// drainingServer is the webhook server of a replica that may be told to stop: once draining()
// is true, every admission answer says `Connection: close`, so the API server drops the
// connection after reading it instead of keeping it for its next request.
//
// Why: the API server calls webhooks over HTTP/1.1 keep-alive connections (k8s.io/apiserver
// pkg/util/webhook forces http/1.1) to the Service, and keeps using a connection to a replica
// after that replica left the Service's endpoints (the flow is already translated). When the
// replica then stops, its server closes those idle connections, and a request the API server
// was writing on one at that moment fails ("write: broken pipe"); a POST is not retried, so
// with failurePolicy Fail the object is refused. Seen on the test node: 1 of 76 dry-run creates
// failed that way while the leader's pod was deleted. Closing each connection after an answer,
// for the shutdown delay before the server stops, leaves it none to close under a request.
type drainingServer struct {
	webhook.Server
	draining func() bool
}

// Register registers hook at path, answering with `Connection: close` while draining.
func (s drainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}
