package observe

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Summary is the report in one line, like the first write-up's: "1,412 keys with more than 5
// attempts; peak 31 for one key; longest span 22 min", then what it was read from and the
// highest observed amplification.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s with more than %d %s; peak %s for one key; longest span %s",
		Thousands(r.OverCount), plural(r.OverCount, "key", "keys"), r.Threshold, plural(r.Threshold, "attempt", "attempts"),
		Thousands(r.PeakAttempts), Span(r.LongestSpan))
	if r.LongestSpan >= time.Minute && r.LongestSpan < time.Hour {
		fmt.Fprintf(&b, " (%d min)", int(r.LongestSpan.Round(time.Minute)/time.Minute))
	}
	fmt.Fprintf(&b, " (%s %s, %s attempts", Thousands(r.Keys), plural(r.Keys, "key", "keys"), Thousands(r.Stats.Attempts))
	if r.PeakAmplification > 0 {
		fmt.Fprintf(&b, "; observed amplification up to %s at %s", Thousands(r.PeakAmplification), cell(r.PeakAmplificationAt))
	}
	b.WriteString(")")
	return b.String()
}

// WriteTable writes the keys over the threshold, worst first, then the summary line.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Over) > 0 {
		fmt.Fprintln(tw, "KEY\tKIND\tMETHOD\tATTEMPTS\tCHAIN LINKS\tFAILURES\tDEEPEST\tAMPLIFICATION\tFIRST\tSPAN\tSERVICES (attempts)")
		for _, k := range r.Over {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", cell(k.Key), k.Kind, cell(dashIfEmpty(k.Methods)), k.Attempts, k.ChainLinks, k.Failures,
				cell(k.Deepest), k.Amplification, k.First.UTC().Format("2006-01-02T15:04:05.000Z"), Span(k.Span), servicesCell(k))
		}
		if r.OverCount > len(r.Over) {
			fmt.Fprintf(tw, "... %s more\n", Thousands(r.OverCount-len(r.Over)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

func servicesCell(k KeyReport) string {
	var b strings.Builder
	for i, c := range k.Callers {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(cell(c))
	}
	if len(k.Callers) > 0 {
		b.WriteString(" > ")
	}
	for i, s := range k.Services {
		if i > 0 {
			b.WriteString(" > ")
		}
		b.WriteString(cell(s.Service))
		b.WriteString(" ")
		b.WriteString(strconv.Itoa(s.Attempts))
	}
	return b.String()
}

// WriteJSON writes the report as one indented JSON document, the summary line included.
func (r *Report) WriteJSON(w io.Writer) error {
	out := struct {
		Summary string `json:"summary"`
		*Report
	}{r.Summary(), r}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(out)
}

// Thousands writes n with comma separators: 1412 -> "1,412".
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Span writes a duration: milliseconds under a second ("340 ms"), seconds with one decimal
// under an hour ("195.6 s", not rounded to minutes: a storm's span is read to the tenth),
// then hours, minutes and seconds ("1 h 5 min 12.3 s"). Tenths are truncated, never rounded
// up (3.96 s is "3.9 s"), so that a span shown is never longer than the one measured.
func Span(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Hour:
		return tenths(d) + " s"
	}
	h := int(d / time.Hour)
	m := int(d % time.Hour / time.Minute)
	return fmt.Sprintf("%d h %d min %s s", h, m, tenths(d%time.Minute))
}

func tenths(d time.Duration) string {
	t := int64(d / (100 * time.Millisecond))
	return Thousands(int(t/10)) + "." + strconv.FormatInt(t%10, 10)
}

// cell is a value from a log line as the table prints it: as it is when it is printable UTF-8
// with no blank but a space, else Go-quoted ("k\x1b[2J", "a\nb", "k\xff"). Keys and names
// come from request headers a client chose: written raw, a newline would forge a row of the
// table, a tab shift its columns, an escape sequence drive the terminal, and two keys that
// differ only in invalid bytes would print alike.
func cell(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			return strconv.Quote(s)
		}
	}
	return s
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
