package framework

import "regexp"

// cellSep separates cells of kubectl's table output.
var cellSep = regexp.MustCompile(`\s{2,}`)
