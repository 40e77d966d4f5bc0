package loop

// HandoffReason is why a loop handed a connection to the goroutine engine:
// the label of retrycap_proxy_loop_handoffs_total{reason}.
type HandoffReason uint8

// The reasons, each a request (or answer) the loop does not serve itself.
const (
	HandoffHeadTooLarge     HandoffReason = iota + 1 // a request head over 8 KiB
	HandoffMalformed                                 // a head the loop's parser refuses (fasthttp answers it)
	HandoffHTTP10                                    // not HTTP/1.1
	HandoffConnect                                   // CONNECT
	HandoffRequestBody                               // chunked, or over 64 KiB, or a Transfer-Encoding
	HandoffUpgrade                                   // Upgrade
	HandoffExpect                                    // Expect
	HandoffScheme                                    // not plain http
	HandoffUnknownHost                               // a host no --upstreams entry names
	HandoffStreamedResponse                          // an answer whose body streams (the client's connection follows it)
	HandoffSelfLoop                                  // a known upstream resolving to the proxy's own listener (answered 508)
	HandoffH2C                                       // h2c with prior knowledge (the HTTP/2 client preface), for the h2c path
)

var reasonNames = [...]string{
	HandoffHeadTooLarge:     "head-too-large",
	HandoffMalformed:        "malformed",
	HandoffHTTP10:           "http/1.0",
	HandoffConnect:          "connect",
	HandoffRequestBody:      "request-body",
	HandoffUpgrade:          "upgrade",
	HandoffExpect:           "expect",
	HandoffScheme:           "scheme",
	HandoffUnknownHost:      "unknown-host",
	HandoffStreamedResponse: "streamed-response",
	HandoffSelfLoop:         "self-loop",
	HandoffH2C:              "h2c",
}

// String is the reason's metric label.
func (r HandoffReason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "unknown"
}

// h2cPrefaceHead is the head-shaped start of the HTTP/2 client preface
// (RFC 9113 3.4: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").
var h2cPrefaceHead = []byte("PRI * HTTP/2.0\r\n\r\n")
