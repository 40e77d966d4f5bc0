package observe

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/retrycap/retrycap/internal/textbom"
)

// DefaultMaxLine is the longest line observe parses (1 MiB): a longer one is counted in
// Stats.TooLong and skipped, and the run goes on. Memory for a line is at most this.
const DefaultMaxLine = 1 << 20

const readBuffer = 256 << 10

// shapeState carries what the line shapes need across lines: the CRI partial lines ("P") of
// each stream waiting for their final part ("F").
type shapeState struct {
	partial [2][]byte // stdout, stderr
	max     int
	over    [2]bool
}

// stripShapes removes what the kubelet and kubectl put in front of a container's line:
//
//	[pod/NAME/CONTAINER] ...                       kubectl logs --prefix
//	2026-11-24T14:02:11.118123456Z ...             kubectl logs --timestamps
//	2026-11-24T14:02:11.118123456Z stdout F ...    the CRI log file on the node (/var/log/pods/...)
//
// A CRI partial line (tag P: the runtime split a line over 16 KiB) is held in st and nil
// returned until its final part; st nil reads P lines as if they were whole.
func stripShapes(line []byte, st *shapeState) []byte {
	if bytes.HasPrefix(line, []byte("[pod/")) {
		if i := bytes.Index(line, []byte("] ")); i > 0 {
			line = line[i+2:]
		}
	}
	if len(line) < 21 || !isDigit(line[0]) || line[4] != '-' {
		return line
	}
	sp := bytes.IndexByte(line, ' ')
	if sp < 20 || sp > 36 {
		return line
	}
	if _, ok := parseTime(line[:sp]); !ok {
		return line
	}
	line = line[sp+1:]
	var stream int
	switch {
	case bytes.HasPrefix(line, []byte("stdout ")):
		stream = 0
	case bytes.HasPrefix(line, []byte("stderr ")):
		stream = 1
	default:
		return line // --timestamps
	}
	rest := line[len("stdout "):]
	if len(rest) < 2 || (rest[0] != 'F' && rest[0] != 'P') || (len(rest) > 1 && rest[1] != ' ') {
		return line
	}
	tag, content := rest[0], rest[2:]
	if st == nil {
		return content
	}
	if tag == 'P' {
		if !st.over[stream] {
			if len(st.partial[stream])+len(content) > st.max {
				st.over[stream] = true
				st.partial[stream] = st.partial[stream][:0]
			} else {
				st.partial[stream] = append(st.partial[stream], content...)
			}
		}
		return nil
	}
	if st.over[stream] {
		st.over[stream] = false
		return tooLongMarker
	}
	if len(st.partial[stream]) > 0 {
		if len(st.partial[stream])+len(content) > st.max {
			st.partial[stream] = st.partial[stream][:0]
			return tooLongMarker
		}
		whole := append(st.partial[stream], content...)
		st.partial[stream] = whole[:0]
		return whole
	}
	return content
}

var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// tooLongMarker is returned by stripShapes for a CRI line whose parts add up to more than the
// limit (compared by identity, never by content).
var tooLongMarker = []byte{0}

// scanLines reads r line by line with bounded memory (a line over maxLine is counted in
// TooLong and skipped up to its newline), strips the line shapes, parses each line with p and
// calls fold for each attempt. A read error (a truncated gzip stream, a connection cut) ends
// the stream: the lines before it are counted and folded, a line it cut is counted bad, and
// the error names the stream, the line and the byte offset in what was read.
//
// fold returns false when the attempt would take the aggregates over their bound: the scan
// stops there, the line not counted (the counts are those of the lines before it), and the
// error is a *LimitError naming the line.
func scanLines(r io.Reader, src Source, maxLine int, p *parser, fold func(*rec) bool) (Stats, error) {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	var st Stats
	br := bufio.NewReaderSize(r, readBuffer)
	var off int64 // bytes read before the current line
	br, off = textbom.Reader(br)
	shapes := &shapeState{max: maxLine}
	var long []byte
	// phys counts the lines as a file holds them (a CRI line's P parts each one), for the
	// messages: what an editor or sed -n shows at that number.
	phys := 0
	bad := func(err error) {
		st.Bad++
		if st.FirstBad == "" {
			st.FirstBad = fmt.Sprintf("%s: line %d: %v", src.Name, phys, err)
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		n := int64(len(line))
		// NUL bytes that start a line are a file's hole, not the line's: logrotate's
		// copytruncate empties a file its writer goes on writing at its old offset, so the
		// writer's next line follows a run of NULs as long as the old file. Dropped, whatever
		// their number; n still counts them (the offsets in messages are the file's).
		line = bytes.TrimLeft(line, "\x00")
		// A UTF-8 byte-order mark that starts a line within the stream is a file's that was
		// joined to the one before it (cat a.log b.log, b written by Windows PowerShell):
		// kept, the line was no access-log line and its attempt was lost, as at a stream's
		// start (textbom). n still counts it.
		line = bytes.TrimPrefix(line, utf8BOM)
		tooLong := false
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				n += int64(len(line))
				if len(long) == 0 {
					line = bytes.TrimLeft(line, "\x00") // still in the hole
				}
				if !tooLong {
					if len(long)+len(line) > maxLine+2 {
						tooLong = true
						long = long[:0]
					} else {
						long = append(long, line...)
					}
				}
			}
			line = long
		}
		cut := err != nil && err != io.EOF
		if n > 0 {
			phys++
		}
		raw := line // before its line end is trimmed: the last line may have none
		if cut && (n > 0 || tooLong) {
			// The read error cut this line: its end is unknown, so it is not parsed.
			st.Lines++
			bad(fmt.Errorf("cut by the read error (%d bytes read of it)", n))
		} else if n > 0 {
			st.Lines++
			line = bytes.TrimRight(line, "\r\n")
			if !tooLong && len(line) > maxLine {
				tooLong = true
			}
			if tooLong {
				st.TooLong++
			} else {
				body := stripShapes(line, shapes)
				switch {
				case body == nil:
					// a CRI partial line: counted with its final part
					st.Lines--
				case len(body) == 1 && &body[0] == &tooLongMarker[0]:
					st.TooLong++
				default:
					k, perr := p.parse(body)
					if k == lineAttempt || k == lineUnread {
						if why := cutAtEnd(p, k, body, err == io.EOF && !bytes.HasSuffix(raw, []byte("\n"))); why != "" {
							k, perr = lineBad, errors.New(why)
						}
					}
					switch k {
					case lineAttempt:
						n, ok := p.emit(fold)
						if !ok {
							// ingress-nginx's tries share one key: n is 0 here.
							st.Lines--
							return st, stopAt(fmt.Sprintf("%s: line %d", src.Name, phys))
						}
						st.Attempts += n
						st.ListedRetries += n - 1
					case lineBad:
						bad(perr)
					case lineUnread:
						st.Unread++
						if st.FirstUnread == "" {
							st.FirstUnread = fmt.Sprintf("%s: line %d: %s", src.Name, phys, p.unread)
						}
					default:
						st.Skipped++
					}
				}
			}
		}
		if err == io.EOF || cut {
			// A CRI line whose final part never came (the file cut after a P line): one
			// line, bad.
			for i := range shapes.partial {
				if len(shapes.partial[i]) > 0 || shapes.over[i] {
					st.Lines++
					bad(errors.New("a CRI partial line (P) whose final part (F) never came"))
				}
			}
		}
		if err == io.EOF {
			return st, nil
		}
		if cut {
			return st, fmt.Errorf("%s: read error at line %d, byte %d of the stream (the lines before it are counted): %w", src.Name, phys+boolInt(n == 0), off, err)
		}
		off += n
	}
}

// stopAt is where a fold met the aggregates' bound: Grouper.Consume puts it in its LimitError.
type stopAt string

func (s stopAt) Error() string { return string(s) + ": the aggregates' bound was met" }

// cutAtEnd says why the last line of a stream, when it has no newline (a file copied or a
// stream cut while a line was written), is not taken as what it reads as: a line whose format
// ends in a bare field may be a longer line cut short. An ingress-nginx line ends in its key
// ($req_id: cut, another key, counted as a request of its own), Istio's text line in its route
// name, and an ingress-nginx line cut before its upstream fields reads as nginx's Combined
// format. A line whose end is a quote or a brace (Envoy's 13 fields, the JSON formats) is
// checked whole by its parser.
func cutAtEnd(p *parser, k lineKind, body []byte, noNewline bool) string {
	if !noNewline {
		return ""
	}
	switch {
	case k == lineAttempt && p.r.format == FormatIngressNginx:
		return "the last line has no newline and ends in its $req_id, the key: cut while written? (not read: a cut key is another key)"
	case k == lineAttempt && p.r.format == FormatEnvoyText && !bytes.HasSuffix(body, []byte(`"`)):
		return "the last line has no newline and ends in Istio's %ROUTE_NAME%: cut while written? (not read)"
	case k == lineUnread && p.unread == whyNginx:
		return "the last line has no newline and reads as nginx's Combined format, as an ingress-nginx line cut before its upstream fields does: cut while written? (not read)"
	}
	return ""
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Open opens a log file, through gzip when its name ends in .gz (a rotated log) or it starts
// with gzip's magic (a rotation copied under another name, logrotate's compressext: read as
// text, its lines were binary, skipped, and the report passed without them; stdin is sniffed
// alike in internal/cli). A *.tmp file is not sniffed: the kubelet compresses a rotation
// "0.log.<time>" into "0.log.<time>.tmp" before renaming it .gz and removing the original, so
// its lines, read, would be counted twice.
func Open(path string, open func(string) (io.ReadCloser, error)) (io.ReadCloser, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 512)
	magic, _ := br.Peek(2) // a read error shows again on the first Read
	gz := len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b && !strings.HasSuffix(path, ".tmp")
	if !strings.HasSuffix(path, ".gz") && !gz {
		return readCloser{br, f}, nil
	}
	zr, err := Gunzip(br)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: named .gz but not gzip: %w", path, err)
	}
	return &gzipFile{zr, f}, nil
}

// Gunzip reads r through gzip, member after member, and names where in r a break is (stdin
// that starts with gzip's magic is read through it; Open's files too).
func Gunzip(r io.Reader) (*GzipReader, error) {
	c := &countingReader{r: r}
	// gzip reads a bufio.Reader (an io.ByteReader) as it is, with no read-ahead of its own,
	// so what c read less what b holds is where in r the decompressor is, exactly (before,
	// gzip's own buffer's end was given: a file's end where its data ended sooner).
	b := bufio.NewReaderSize(c, 64<<10)
	zr, err := gzip.NewReader(b)
	if err != nil {
		return nil, err
	}
	zr.Multistream(false) // the members one by one: where each ends is known (Read)
	return &GzipReader{zr, c, b}, nil
}

// GzipReader is Gunzip's reader.
type GzipReader struct {
	z *gzip.Reader
	c *countingReader
	b *bufio.Reader
}

// at is how many bytes of the compressed stream the decompressor has taken.
func (g *GzipReader) at() int64 { return g.c.n - int64(g.b.Buffered()) }

// readCloser reads through r (a reader of f's that peeked at its start) and closes f.
type readCloser struct {
	io.Reader
	f io.Closer
}

func (r readCloser) Close() error { return r.f.Close() }

type gzipFile struct {
	*GzipReader
	f io.Closer
}

// Read names where in the compressed file a broken stream broke (a truncated rotation ends
// at the file's end, a corrupt block before it).
//
// The members of a file are read one after the other (concatenated rotations, as gzip -d
// reads them); bytes after a member that are no gzip member (a file that is half gzip, half
// text: a log appended to after compression) end the stream with an error that says where the
// last member ended.
func (g *GzipReader) Read(p []byte) (int, error) {
	for {
		n, err := g.z.Read(p)
		if err == io.EOF {
			end := g.at()
			switch rerr := g.z.Reset(g.b); {
			case rerr == io.EOF:
				return n, io.EOF // no member after it
			case rerr != nil:
				return n, fmt.Errorf("gzip: the gzip data ends at byte %d of the file, and what follows is no gzip member: %w", end, rerr)
			}
			g.z.Multistream(false)
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			err = fmt.Errorf("gzip: the compressed stream breaks after byte %d of the file: %w", g.at(), err)
		}
		return n, err
	}
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (g *gzipFile) Close() error {
	err := g.z.Close()
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	return err
}
