package fakeruntime

import (
	"reflect"
	"testing"
	"time"
)

func code(c int32) *int32 { return &c }

func TestProgramFor(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		args    []string
		want    []Step
	}{
		{name: "no command runs forever"},
		{name: "unknown command runs forever", command: []string{"nginx"}},
		{name: "sleep infinity runs forever", command: []string{"sleep", "infinity"}},
		{name: "sleep then exit 0", command: []string{"sleep", "5"}, want: []Step{{At: 5 * time.Second, Exit: code(0)}}},
		{name: "false exits 1", command: []string{"/bin/false"}, want: []Step{{Exit: code(1)}}},
		{
			name: "sh -c script", command: []string{"sh", "-c"}, args: []string{"echo hi; touch /tmp/a && sleep 1.5; rm -f /tmp/a; exit 3"},
			want: []Step{{Log: "hi"}, {Touch: "/tmp/a"}, {At: 1500 * time.Millisecond, Remove: "/tmp/a"}, {At: 1500 * time.Millisecond, Exit: code(3)}},
		},
		{
			name: "echo into a file", command: []string{"sh", "-c", "echo bye > /dev/termination-log"},
			want: []Step{{Touch: "/dev/termination-log", Content: "bye\n"}, {Exit: code(0)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ProgramFor(tt.command, tt.args).Steps
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ProgramFor() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
