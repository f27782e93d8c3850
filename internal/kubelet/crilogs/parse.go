package crilogs

import (
	"bytes"
	"fmt"
	"time"
)

// Stream is the stream a log line was written to.
type Stream string

// The streams of a CRI log line.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// TimeFormat is how timestamps are written when Options.Timestamps is set: RFC 3339 with
// nanoseconds, fixed width, as the kubelet writes them.
const TimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// parseFormat accepts timestamps with or without trailing zeros in the fraction.
const parseFormat = "2006-01-02T15:04:05.999999999Z07:00"

// Line is one parsed line of a CRI log file.
type Line struct {
	Time   time.Time
	Stream Stream
	// Partial is true for a "P" line: Message is the beginning of a longer message and
	// has no newline; the next line of the same stream continues it.
	Partial bool
	// Message is what the container wrote, with its newline for a full ("F") line.
	Message []byte
}

// ParseLine parses one line of a CRI log file, with or without its trailing newline:
// "<RFC 3339 time> <stdout|stderr> <tag>[:<more tags>] <message>". A full line's message
// always ends with a newline, whether or not raw had one; a partial line's never does.
// Message aliases raw.
func ParseLine(raw []byte) (Line, error) {
	var l Line
	ts, rest, ok := bytes.Cut(raw, []byte{' '})
	if !ok {
		return l, fmt.Errorf("no timestamp in log line %q", raw)
	}
	t, err := time.Parse(parseFormat, string(ts))
	if err != nil {
		return l, fmt.Errorf("log line timestamp %q: %w", ts, err)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return l, fmt.Errorf("no stream in log line %q", raw)
	}
	switch Stream(stream) {
	case Stdout, Stderr:
	default:
		return l, fmt.Errorf("unknown stream %q in log line", stream)
	}
	tags, msg, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		// "... stdout F" with an empty message and no separator.
		tags, msg = bytes.TrimSuffix(rest, []byte{'\n'}), nil
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	l.Time, l.Stream, l.Partial = t, Stream(stream), string(tag) == "P"
	switch {
	case l.Partial:
		msg = bytes.TrimSuffix(msg, []byte{'\n'})
	case len(msg) == 0 || msg[len(msg)-1] != '\n':
		msg = append(msg[:len(msg):len(msg)], '\n')
	}
	l.Message = msg
	return l, nil
}
