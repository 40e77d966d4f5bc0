package forward

import "time"

// Limits both engines apply alike.
const (
	// BufferedBodyMax is the largest known-length response body read whole
	// rather than streamed: 64 KiB per request in flight.
	BufferedBodyMax = 64 << 10
	// MaxInterim bounds the 1xx answers skipped before the final one.
	MaxInterim = 100
	// BodyIdleTimeout is the longest a streamed response body may go
	// without a byte arriving from the upstream, or without its client
	// taking a write, before the proxy cuts it (nginx's send_timeout, 60 s).
	BodyIdleTimeout = 60 * time.Second
	// MaxRequestBody is the largest request body the proxy reads (it
	// buffers bodies to replay them).
	MaxRequestBody = 16 << 20
	// MaxResponseHead is the largest upstream answer head (status line and
	// headers) the proxy passes on; HAProxy's default buffer passes 16 KiB.
	MaxResponseHead = 64 << 10
)
