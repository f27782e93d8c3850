package fakeruntime

import (
	"strconv"
	"strings"
	"time"
)

// Step is one thing a fake container does At a time after it started.
type Step struct {
	At time.Duration
	// Exactly one of the following applies, checked in this order.
	Exit    *int32 // the container exits with this code
	OOM     bool   // the container is OOM-killed (exit code 137)
	Log     string // a line written to stdout
	Touch   string // a file created in the container's filesystem
	Content string // with this content (Touch only)
	Remove  string // a file removed
}

// Program is what a fake container does once started. A program whose
// steps never exit runs until it is stopped.
type Program struct {
	Steps []Step
	// StartError, when set, makes StartContainer fail with it: the
	// container is then exited with reason StartError and code 128, as
	// containerd reports it.
	StartError string
	// IgnoreSIGTERM makes StopContainer wait the whole timeout (on the
	// clock) before the container dies with 137.
	IgnoreSIGTERM bool
}

// ProgramFor derives a program from a container's command and args the
// way a shell would run the few commands it knows: `sh -c SCRIPT` with
// statements separated by `;`, `&&` or newlines among sleep N, exit N,
// true, false, echo TEXT [> FILE], touch FILE, rm [-f] FILE; a bare
// `sleep N`, `true`, `false`. A container with no command, or one it does
// not know, runs forever.
func ProgramFor(command, args []string) Program {
	argv := append(append([]string{}, command...), args...)
	if len(argv) == 0 {
		return Program{}
	}
	base := argv[0][strings.LastIndex(argv[0], "/")+1:]
	if (base == "sh" || base == "bash" || base == "ash") && len(argv) >= 3 && argv[1] == "-c" {
		return Program{Steps: script(argv[2])}
	}
	return Program{Steps: script(shellJoin(argv))}
}

func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if strings.ContainsAny(a, " \t;&") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// script interprets a tiny subset of sh. Unknown commands are no-ops; a
// script that ends without exit exits with the status of its last
// command, unless it is empty of known commands (then it runs forever).
func script(s string) []Step {
	var steps []Step
	var at time.Duration
	known := false
	last := int32(0)
	for _, stmt := range splitStatements(s) {
		words := fields(stmt)
		if len(words) == 0 {
			continue
		}
		cmd := words[0][strings.LastIndex(words[0], "/")+1:]
		switch cmd {
		case "sleep":
			known = true
			if len(words) < 2 {
				continue
			}
			if words[1] == "infinity" {
				return steps
			}
			d, err := strconv.ParseFloat(strings.TrimSuffix(words[1], "s"), 64)
			if err != nil {
				return steps
			}
			at += time.Duration(d * float64(time.Second))
			last = 0
		case "exit":
			code := last
			if len(words) > 1 {
				n, _ := strconv.Atoi(words[1])
				code = int32(n)
			}
			return append(steps, Step{At: at, Exit: &code})
		case "true", ":":
			known, last = true, 0
		case "false":
			known, last = true, 1
		case "echo":
			known, last = true, 0
			text, file := words[1:], ""
			for i, w := range text {
				if w == ">" || w == ">>" {
					if i+1 < len(text) {
						file = text[i+1]
					}
					text = text[:i]
					break
				}
			}
			line := strings.Join(text, " ")
			if file != "" {
				steps = append(steps, Step{At: at, Touch: file, Content: line + "\n"})
			} else {
				steps = append(steps, Step{At: at, Log: line})
			}
		case "touch":
			known, last = true, 0
			for _, f := range words[1:] {
				steps = append(steps, Step{At: at, Touch: f})
			}
		case "rm":
			known, last = true, 0
			for _, f := range words[1:] {
				if !strings.HasPrefix(f, "-") {
					steps = append(steps, Step{At: at, Remove: f})
				}
			}
		}
	}
	if !known {
		return nil
	}
	code := last
	return append(steps, Step{At: at, Exit: &code})
}

func splitStatements(s string) []string {
	s = strings.ReplaceAll(s, "&&", ";")
	s = strings.ReplaceAll(s, "\n", ";")
	return strings.Split(s, ";")
}

// fields splits on blanks, keeping quoted strings together.
func fields(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
