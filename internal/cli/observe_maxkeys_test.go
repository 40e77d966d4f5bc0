package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestObserveMaxKeys: over --max-keys the run stops at the line of the first key over it,
// prints the counts of the lines before it and no report, exits 2 naming the file, the line,
// the key and the flag, and reads no further file (before: no bound, every key held, about
// 230 bytes each); a bad value of the flag is refused; -o csv holds no key and is not bound.
func TestObserveMaxKeys(t *testing.T) {
	dir := t.TempDir()
	var a strings.Builder
	for i := range 30 {
		fmt.Fprintf(&a, "%s\n", accessLine("web", "order", fmt.Sprintf("k%02d", i%25), 1, 503)) // 25 keys, then 5 repeats
	}
	if err := os.WriteFile(filepath.Join(dir, "a.log"), []byte(a.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, "%s\n", accessLine("web", "order", fmt.Sprintf("b%02d", i), 1, 503))
	}
	if err := os.WriteFile(filepath.Join(dir, "b.log"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// A path after the stop is not opened: an empty directory's warning would show it.
	empty := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe", "-f", dir, "-f", empty, "--max-keys", "30", "--threshold", "0"}, strings.NewReader(""), &stdout, &stderr)
	want := "observe: 35 lines read: 35 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
		"retrycap: observe: stopped at " + filepath.Join(dir, "b.log") + `: line 6: "b05" would be one of more than 30 distinct keys, over --max-keys 30 (memory is per key: about 1 GiB per 4,000,000); ` +
		"aggregate in the log store (-o csv to load it, -o sql or --postgres to query it), read fewer lines, or raise --max-keys where the memory is\n"
	if code != ExitBadInput || stdout.Len() != 0 || stderr.String() != want {
		t.Fatalf("exit %d, stdout %q\nstderr\n%s\nwant\n%s", code, stdout.String(), stderr.String(), want)
	}
	// At the bound exactly, the report.
	stdout.Reset()
	stderr.Reset()
	if code := execute([]string{"observe", "-f", dir, "--max-keys", "35", "--top", "1"}, strings.NewReader(""), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "(35 keys, 40 attempts;") {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	// No bound (0), and -o csv (no key held) under a bound of 1.
	for _, args := range [][]string{{"--max-keys", "0"}, {"--max-keys", "1", "-o", "csv"}} {
		stdout.Reset()
		stderr.Reset()
		if code := execute(append([]string{"observe", "-f", dir}, args...), strings.NewReader(""), &stdout, &stderr); code != 0 ||
			stderr.String() != "observe: 40 lines read: 40 attempts, 0 skipped, 0 bad, 0 over the line limit\n" {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr.String())
		}
	}
	stderr.Reset()
	if code := execute([]string{"observe", "-f", dir, "--max-keys", "-1"}, strings.NewReader(""), &stdout, &stderr); code != ExitBadInput ||
		stderr.String() != "retrycap: observe: --max-keys -1: must be 0 (no bound) or more\n" {
		t.Fatalf("exit %d %q", code, stderr.String())
	}
}
