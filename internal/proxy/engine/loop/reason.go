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
}

// String is the reason's metric label.
func (r HandoffReason) String() string {
	if int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "unknown"
}
