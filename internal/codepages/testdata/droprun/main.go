// Command droprun lets go of its executable's pages (codepages.Drop),
// then runs code that reads the type descriptors, interface tables and
// function tables a position-independent build relocates at start, and
// prints what it computed: a page that lost its relocation crashes it.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/pisyncd/pisyncd/internal/codepages"
)

type shape interface{ area() float64 }

type square struct{ S float64 }
type rect struct{ W, H float64 }

func (s square) area() float64 { return s.S * s.S }
func (r rect) area() float64   { return r.W * r.H }

func main() {
	n, err := codepages.Drop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if n == 0 {
		fmt.Fprintln(os.Stderr, "nothing dropped")
		os.Exit(1)
	}
	shapes := []shape{square{2}, rect{2, 3}, square{1}}
	sort.Slice(shapes, func(i, j int) bool { return shapes[i].area() < shapes[j].area() })
	b, err := json.Marshal(map[string]any{"shapes": shapes, "os": runtime.GOOS})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runtime.GC() // walks the stacks and the heap by the function and type tables
	fmt.Println(strings.ToUpper(string(b)))
}
