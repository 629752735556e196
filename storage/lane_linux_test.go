package storage

import "testing"

func TestKernelAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v1045", true},
		{"5.8.0", true},
		{"5.8-rc1", true},
		{"5.7.19", false},
		{"4.19.0-amd64", false},
		{"10.0", true},
		{"garbage", false},
		{"", false},
	} {
		if got := kernelAtLeast(c.release, 5, 8); got != c.want {
			t.Errorf("kernelAtLeast(%q, 5, 8): got %v, want %v", c.release, got, c.want)
		}
	}
}
