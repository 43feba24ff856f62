package cli

import "testing"

func TestFreeHugeBlocks(t *testing.T) {
	for _, c := range []struct {
		info string
		want int
	}{
		{"Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n" +
			"Node 0, zone    DMA32      0      4      2      2      1      2      0      3      3      1    753 \n" +
			"Node 0, zone   Normal  10652  10571   6404   3773   1812    958    643    430    340    204   3894 \n",
			1 + 753*2 + 204 + 3894*2},
		{"Node 0, zone   Normal  5 5 5 5 5 5 5 5 5 0 0\n", 0}, // fragmented: nothing of order 9 or more
		{"Node 0, zone   Normal  5 5 5 5 5 5 5 5 5 x 0\n", 0}, // not numbers
		{"", 0}, // no zones
		{"Node 0, zone   Normal  1 2\nNode 1, zone Normal 0 0 0 0 0 0 0 0 0 3\n", 3}, // short lines and a second node
	} {
		if got := freeHugeBlocks([]byte(c.info)); got != c.want {
			t.Errorf("freeHugeBlocks(%q) = %d, want %d", c.info, got, c.want)
		}
	}
}
