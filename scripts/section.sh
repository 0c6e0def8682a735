# Sourced by the bench scripts. write_section OUT NAME SECTION HEADER puts the
# file SECTION, which starts with "<!-- NAME:begin" and ends with
# "<!-- NAME:end -->", in place of that section of the Markdown file OUT; if
# OUT has no such section, HEADER (a Markdown heading, or "" for none) and
# SECTION are appended to it.
write_section() {
	local out=$1 name=$2 section=$3 header=$4 tmpout
	if [[ -f $out ]] && grep -q "<!-- $name:begin" "$out"; then
		tmpout=$(mktemp)
		awk -v sec="$section" -v b="<!-- $name:begin" -v e="<!-- $name:end -->" '
			index($0, b) == 1 { while ((getline line < sec) > 0) print line; skip = 1; next }
			index($0, e) == 1 { skip = 0; next }
			!skip { print }
		' "$out" >"$tmpout"
		cp "$tmpout" "$out"
		rm -f "$tmpout"
	else
		{
			if [[ -s $out ]]; then echo; fi
			if [[ -n $header ]]; then
				echo "$header"
				echo
			fi
			cat "$section"
		} >>"$out"
	fi
}
