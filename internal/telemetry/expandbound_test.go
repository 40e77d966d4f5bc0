package telemetry

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestExpandVarsBounded: $(NAME) references expand against values already expanded (as the
// kubelet expands them), so a few lines of env multiply: Z of 1 KiB, E1 of 64 references to
// it, E2 of 64 to E1, E3 of 64 to E2 expand to 256 MiB from a manifest of 2 KiB (and a fourth
// level to 16 GiB). The expansion is bounded by maxExpansion (16 MiB) in all per Pods call:
// past it, a reference is left as written and one warning names the workload, the container
// and the variable. Stated bound: Pods allocates under 64 MiB for this input (before: 1.4 GB).
func TestExpandVarsBounded(t *testing.T) {
	refs := func(name string) string { return strings.Repeat("$("+name+")", 64) }
	doc := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: bomb, namespace: shop}
spec:
  template:
    spec:
      containers:
      - name: app
        env:
        - {name: HOST, value: order}
        - {name: FIRST, value: "http://$(HOST):8080"}
        - {name: Z, value: %q}
        - {name: E1, value: %q}
        - {name: E2, value: %q}
        - {name: E3, value: %q}
        - {name: ORDER, value: "http://$(Z0):8080"}
        - {name: Z0, value: order}
        args: ["--upstream=http://$(HOST):8080"]
`, strings.Repeat("x", 1024), refs("Z"), refs("E1"), refs("E2"))
	s := NewManifestSet("default")
	if err := s.AddStream([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pods, warns := s.Pods()
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	if got > 64<<20 {
		t.Fatalf("Pods allocated %d bytes, over the bound of %d", got, 64<<20)
	}
	t.Logf("Pods allocated %d bytes", got)
	if len(pods) != 1 {
		t.Fatalf("pods: %d, want 1", len(pods))
	}
	total := 0
	vals := map[string]string{}
	for _, e := range pods[0].Env {
		total += len(e.Value)
		vals[e.Name] = e.Value
	}
	if total > maxExpansion+8192 {
		t.Fatalf("env values hold %d bytes, over maxExpansion %d and the manifest", total, maxExpansion)
	}
	// E1 (64 KiB) and E2 (4 MiB) fit; of E3's 64 references to E2, 2 fit what is left of 16 MiB
	// (11.9 MiB), the 62 others are left as written.
	if got, want := len(vals["E1"]), 64*1024; got != want {
		t.Errorf("E1: %d bytes, want %d", got, want)
	}
	if got, want := len(vals["E2"]), 4<<20; got != want {
		t.Errorf("E2: %d bytes, want %d", got, want)
	}
	if got, want := vals["E3"], strings.Repeat(vals["E2"], 2)+strings.Repeat("$(E2)", 62); got != want {
		t.Errorf("E3: %d bytes %.40q..., want 2 expansions of E2 and 62 references as written", len(got), got)
	}
	// A value that fits what is left is expanded as the kubelet does (FIRST, and args[0]: E3
	// stopped with 3.9 MiB left); a reference to a name defined later is not (the kubelet's
	// order). One warning for the container, naming E3.
	if got := vals["FIRST"]; got != "http://order:8080" {
		t.Errorf("FIRST: %q", got)
	}
	if got := vals["ORDER"]; got != "http://$(Z0):8080" {
		t.Errorf("ORDER: %q", got)
	}
	if got := vals["args[0]"]; got != "http://order:8080" {
		t.Errorf("args[0]: %q", got)
	}
	want := []string{fmt.Sprintf("Deployment shop/bomb container app: env E3: $(NAME) references expand to more than %d bytes in all: those past it are left as written, not read", maxExpansion)}
	if fmt.Sprint(warns) != fmt.Sprint(want) {
		t.Fatalf("warnings\n got  %q\n want %q", warns, want)
	}
}
