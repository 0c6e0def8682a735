package rdmap

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/iwarp-go/iwarp-go/termcode"

	"github.com/stretchr/testify/require"
)

type mdRow struct {
	line    int
	code    termcode.Code
	m, d, r bool
}

// readConditionTable parses the table under "## Condition table" in
// docs/rfc-notes/terminate.md. Its first seven columns are fixed:
// Condition | Layer | EType | Code | M | D | R.
func readConditionTable(t *testing.T) map[string]mdRow {
	t.Helper()
	f, err := os.Open("../docs/rfc-notes/terminate.md")
	require.NoError(t, err)
	defer f.Close()
	rows := map[string]mdRow{}
	in, header := false, false
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(s, "## "):
			in = s == "## Condition table"
			continue
		case !in || !strings.HasPrefix(s, "|"):
			continue
		}
		cells := strings.Split(strings.Trim(s, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		require.GreaterOrEqual(t, len(cells), 7, "line %d", line)
		if !header {
			require.Equal(t, []string{"Condition", "Layer", "EType", "Code", "M", "D", "R"}, cells[:7], "line %d", line)
			header = true
			continue
		}
		if strings.HasPrefix(cells[0], "---") {
			continue
		}
		layer, err := strconv.ParseUint(cells[1], 10, 4)
		require.NoError(t, err, "line %d", line)
		etype, err := strconv.ParseUint(cells[2], 10, 4)
		require.NoError(t, err, "line %d", line)
		require.True(t, strings.HasPrefix(cells[3], "0x"), "line %d: code %q", line, cells[3])
		code, err := strconv.ParseUint(cells[3][2:], 16, 8)
		require.NoError(t, err, "line %d", line)
		flag := func(s string) bool {
			require.Contains(t, []string{"yes", "no"}, s, "line %d", line)
			return s == "yes"
		}
		_, dup := rows[cells[0]]
		require.False(t, dup, "line %d: %s listed twice", line, cells[0])
		rows[cells[0]] = mdRow{line, termcode.Make(termcode.Layer(layer), uint8(etype), uint8(code)), flag(cells[4]), flag(cells[5]), flag(cells[6])}
	}
	require.NoError(t, sc.Err())
	require.True(t, header, "no condition table found")
	return rows
}

func TestConditionTable_MatchesTerminateMD(t *testing.T) {
	rows := readConditionTable(t)
	seen := map[string]bool{}
	for _, c := range Conditions() {
		row, ok := rows[c.String()]
		require.True(t, ok, "%s has no row in terminate.md", c)
		seen[c.String()] = true
		require.Equal(t, row.code, c.Code(), "%s (terminate.md line %d)", c, row.line)
		require.True(t, c.Code().Defined(), "%s sends an unregistered code", c)
		m, d, r := c.Flags()
		require.Equal(t, [3]bool{row.m, row.d, row.r}, [3]bool{m, d, r}, "%s M/D/R (line %d)", c, row.line)
		back, ok := ConditionByName(c.String())
		require.True(t, ok)
		require.Equal(t, c, back)
	}
	for name, row := range rows {
		require.True(t, seen[name], "terminate.md line %d: %s is not an rdmap.Condition", row.line, name)
	}
}

// The flags a condition promises are the ones NewTerminate produces from
// an error for it, given the offending segment's headers.
func TestConditionFlags_AreWhatNewTerminateSends(t *testing.T) {
	untagged := AppendSend(nil, OpSend, true, 0, 1, 0)
	tagged := AppendWrite(nil, true, 0x10, 0)
	rr := AppendReadRequestBody(nil, ReadRequestFields{Size: 4})
	for _, c := range Conditions() {
		for _, hdr := range [][]byte{untagged, tagged} {
			var body []byte
			if condTable[c].readReq {
				body = rr
			}
			term := NewTerminate(NewError(c, hdr, 100, body))
			require.Equal(t, c.Code(), term.Code, c.String())
			m, d, r := term.Flags()
			wm, wd, wr := c.Flags()
			require.Equal(t, [3]bool{wm, wd, wr}, [3]bool{m, d, r}, c.String())
			if d {
				require.Equal(t, hdr, term.DDPHeader)
				require.Equal(t, uint16(100), term.SegmentLen)
			}
			if r {
				require.Equal(t, rr, term.RDMAHeader)
			}
		}
	}
}

func TestCondition_Undefined(t *testing.T) {
	for _, c := range []Condition{0, numConditions, 255} {
		require.Contains(t, c.String(), "Condition(")
		require.Equal(t, termcode.RDMAPLocalCatastrophic, c.Code())
	}
	_, ok := ConditionByName("NoSuchCondition")
	require.False(t, ok)
	require.Len(t, Conditions(), int(numConditions)-1)
}
