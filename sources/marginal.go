package sources

// marginal sums a cached internal histogram (axes fromKeys with sizes) down
// to the axes toKeys (a subset, in any order): the histogram over fewer
// columns of the same rows, exact because the internal histogram keeps the
// rows each column drops in that column's dropped cell (see strides).
func marginal(counts []float64, fromKeys []string, sizes []int, toKeys []string, toSizes []int) []float64 {
	// stride of each source axis in the target (0: summed away)
	n := 1
	for _, s := range toSizes {
		n *= s
	}
	out := make([]float64, n)
	target := make([]int, len(fromKeys))
	for i, fk := range fromKeys {
		st := 1
		for j := len(toKeys) - 1; j >= 0; j-- {
			if toKeys[j] == fk {
				target[i] = st
				break
			}
			st *= toSizes[j]
		}
		if len(toKeys) == 0 || !has(toKeys, fk) {
			target[i] = 0
		}
	}
	// Odometer over the source cells, tracking the target index.
	idx := make([]int, len(fromKeys))
	t := 0
	for _, v := range counts {
		out[t] += v
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			t += target[i]
			if idx[i] < sizes[i] {
				break
			}
			t -= target[i] * idx[i]
			idx[i] = 0
		}
	}
	return out
}

func has(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
