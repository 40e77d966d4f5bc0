//go:build rltrace

package h2

// A debug build's runtime/trace of the relay (go build -tags rltrace):
// RL_TRACE=file starts a trace RL_TRACE_AFTER after the process starts
// and stops it RL_TRACE_FOR later.

import (
	"os"
	"runtime/trace"
	"time"
)

func init() {
	f := os.Getenv("RL_TRACE")
	if f == "" {
		return
	}
	after, _ := time.ParseDuration(os.Getenv("RL_TRACE_AFTER"))
	dur, _ := time.ParseDuration(os.Getenv("RL_TRACE_FOR"))
	go func() {
		time.Sleep(after)
		w, err := os.Create(f)
		if err != nil {
			return
		}
		_ = trace.Start(w)
		time.Sleep(dur)
		trace.Stop()
		_ = w.Close()
	}()
}
