package goroutine

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// requestOf reaches the request from the header fasthttp's server passes to
// HeaderReceived by the header field's offset: sound only while that server
// passes &ctx.Request.Header (its one call site in v1.78.0, server.go
// serveConn). An upgrade of fasthttp must re-read that call site before this
// pin moves; the test fails until it is moved.
const fasthttpCheckedVersion = "v1.78.0"

func TestRequestOfCheckedAgainstFasthttpVersion(t *testing.T) {
	// A test binary's build info lists no dependencies, so the module's
	// go.mod (four folders up) is what is read.
	const gomod = "../../../../go.mod"
	b, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatalf("reading %s: %v", gomod, err)
	}
	var got []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "github.com/valyala/fasthttp" {
				got = append(got, f[i+1])
			}
		}
	}
	if len(got) != 1 || got[0] != fasthttpCheckedVersion {
		t.Fatalf("%s requires github.com/valyala/fasthttp %q, requestOf (engine.go) was checked against %s: re-read the HeaderReceived call site in fasthttp's server.go, then move fasthttpCheckedVersion", gomod, got, fasthttpCheckedVersion)
	}
}

func TestRequestOfIsTheRequestOfItsHeader(t *testing.T) {
	var r fasthttp.Request
	if got := requestOf(&r.Header); got != &r {
		t.Fatalf("requestOf(&r.Header) = %p, want %p", got, &r)
	}
	// The offset is the field's, whatever fasthttp's layout: a move of
	// Header within Request keeps this true.
	if unsafe.Pointer(requestOf(&r.Header)) != unsafe.Pointer(&r) {
		t.Fatal("requestOf does not invert &r.Header")
	}
}
