package labapp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// A gRPC chain app runs as a child process of its own, because grpc-go
// takes its proxy from HTTPS_PROXY and reads it once per process: each app
// calls through its own sidecar, so each needs a process whose environment
// is what the injector sets (HTTPS_PROXY=http://127.0.0.1:15001 there, the
// app's proxy here). The child is the running executable itself, started
// with GRPCChildArg as its only argument and the app's GRPCConfig in
// GRPCChildEnv; a binary that can be such a child calls RunGRPCChild first
// thing in main (the retrycap CLI does, and so does RunTestsWithProxy for a
// test binary).
const (
	GRPCChildArg = "labapp-grpc-child"
	GRPCChildEnv = "RETRYCAP_LABAPP_GRPC"
)

// grpcChildren is set by RunGRPCChild: the running executable can be a
// child (StartGRPCProcess refuses otherwise, rather than start a binary
// that would do something else with the argument).
var grpcChildren bool

// RunGRPCChild makes the running executable able to be a gRPC app child.
// Called with GRPCChildArg, it is the child: it serves the app of
// GRPCChildEnv, writes "labapp-grpc listening addr=HOST:PORT" to stdout,
// and exits (0) on SIGTERM or when its stdin closes (its parent died); it
// never returns then. Otherwise it returns at once.
func RunGRPCChild() {
	grpcChildren = true
	if len(os.Args) != 2 || os.Args[1] != GRPCChildArg {
		return
	}
	os.Exit(grpcChildMain(os.Stdin, os.Stdout, os.Stderr))
}

func grpcChildMain(stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg GRPCConfig
	if err := json.Unmarshal([]byte(os.Getenv(GRPCChildEnv)), &cfg); err != nil {
		fmt.Fprintf(stderr, "labapp-grpc: %s: %v\n", GRPCChildEnv, err)
		return 2
	}
	a, err := StartGRPC(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "labapp-grpc:", err)
		return 1
	}
	fmt.Fprintf(stdout, "labapp-grpc listening addr=%s\n", a.Addr())
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
	a.Close()
	return 0
}

// GRPCProc is a gRPC chain app running as a child process.
type GRPCProc struct {
	Cmd    *exec.Cmd
	Addr   string // its listen address, host:port
	stdin  io.WriteCloser
	stderr *lockedWriter
	done   chan struct{}
}

// StartGRPCProcess starts cfg's app as a child process whose HTTPS_PROXY
// is proxyURL (and NO_PROXY empty, so a name like order is proxied), and
// waits at most timeout for it to listen.
func StartGRPCProcess(cfg GRPCConfig, proxyURL string, timeout time.Duration) (*GRPCProc, error) {
	if !grpcChildren {
		return nil, errors.New("gRPC app " + cfg.Name + ": this executable cannot run gRPC lab apps (its main does not call labapp.RunGRPCChild)")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("gRPC app %s: %w", cfg.Name, err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("gRPC app %s: %w", cfg.Name, err)
	}
	cmd := exec.Command(exe, GRPCChildArg)
	env := []string{GRPCChildEnv + "=" + string(js), "HTTPS_PROXY=" + proxyURL, "https_proxy=" + proxyURL, "NO_PROXY=", "no_proxy="}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case GRPCChildEnv, "HTTPS_PROXY", "NO_PROXY":
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = env
	p := &GRPCProc{Cmd: cmd, stderr: &lockedWriter{w: &strings.Builder{}}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("gRPC app %s: %w", cfg.Name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("gRPC app %s: %w", cfg.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gRPC app %s: start: %w", cfg.Name, err)
	}
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "labapp-grpc listening addr="); ok {
				addrs <- v
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(addrs)
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	select {
	case a, ok := <-addrs:
		if !ok {
			<-p.done
			return nil, fmt.Errorf("gRPC app %s exited before listening: %s", cfg.Name, p.stderr.String())
		}
		p.Addr = a
	case <-time.After(timeout):
		p.Stop(time.Second)
		return nil, fmt.Errorf("gRPC app %s did not listen within %s: %s", cfg.Name, timeout, p.stderr.String())
	}
	return p, nil
}

// Stop ends the child: SIGTERM, then a kill after timeout.
func (p *GRPCProc) Stop(timeout time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
	_ = p.stdin.Close()
}
