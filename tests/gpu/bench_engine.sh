#!/bin/sh
# bench_engine.sh [BUILD] - the reference engine's GPU backend at real
# dimensions (issue: Kimi K2 INT4 and GLM-4.7 FP8, a few layers), prefill and
# decode tokens/s with and without the shim rerouting, side by side on this
# GPU.  Without the shim the stand-ins run their Hopper configuration
# themselves (196608 / 197632 / 106496 B of shared memory); under
# `sm120 run --mode reroute --target sm120` the shim sends them to the
# bundled SM120 kernels.  ENGINE_BENCH_DIR holds the checkpoints (written
# once, ~14 GB and ~9 GB); ENGINE_BENCH_PROMPT the prefill length (512);
# ENGINE_BENCH_CHUNK the prompt tokens a prefill step takes (512; `ref run
# --chunk`: 2048 gives Kimi K2's experts 43 rows a launch, as a server's
# chunked prefill does);
# ENGINE_BENCH_REPEAT runs per mode (2; the faster is kept).  Prefill forms
# the prompt's last logits row only (`ref run --last-logits`), as a server
# does: every row's LM head and copy to the host would outweigh the layers.
set -eu
build=${1:-build}
dir=${ENGINE_BENCH_DIR:-${TMPDIR:-/tmp}/sm120-engine-bench}
plen=${ENGINE_BENCH_PROMPT:-512}
chunk=${ENGINE_BENCH_CHUNK:-512}
repeat=${ENGINE_BENCH_REPEAT:-2}
steps=33
mkdir -p "$dir"
prompt=$(awk -v n="$plen" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? "," : "", (i * 7919 + 13) % 150000 }')

printf '%-34s %-8s %12s %12s %12s %12s  %s\n' model mode "prefill t/s" "decode t/s" "ms/layer pf" "ms/layer dec" tokens
for spec in "kimi-k2 int4 2" "glm4-moe fp8 4"; do
	set -- $spec
	m=$dir/$1-$2-real-$3
	if [ ! -f "$m/config.json" ]; then
		echo "== writing $m" >&2
		"$build/sm120" ref make-model --arch "$1" --quant "$2" --real-dims --layers "$3" --seed 1 "$m" >&2
	fi
	for mode in plain reroute; do
		best_pf=0; best_dec=0; toks=
		i=0
		while [ "$i" -lt "$repeat" ]; do
			i=$((i + 1))
			if [ "$mode" = plain ]; then
				out=$("$build/sm120" ref run --backend gpu --max-seq $((plen + steps + 8)) --chunk "$chunk" --steps $steps \
					--last-logits --prompt "$prompt" "$m" 2>&1) || { echo "$out" >&2; exit 1; }
			else
				out=$("$build/sm120" run --mode reroute --target sm120 --model "$m" --set kv_cache_dtype=bf16 \
					--log "$dir/$1.$mode.jsonl" -- "$build/sm120" ref run --backend gpu \
					--max-seq $((plen + steps + 8)) --chunk "$chunk" --steps $steps --last-logits --prompt "$prompt" \
					"$m" 2>&1) ||
					{ echo "$out" >&2; exit 1; }
			fi
			pf=$(echo "$out" | sed -n 's/^prefill: \([0-9.]*\) tok\/s.*/\1/p')
			dec=$(echo "$out" | sed -n 's/.*decode: \([0-9.]*\) tok\/s.*/\1/p')
			toks=$(echo "$out" | sed -n 's/.*generated: //p' | cut -d' ' -f1-12)
			best_pf=$(awk -v a="$pf" -v b="$best_pf" 'BEGIN { print (a > b ? a : b) }')
			best_dec=$(awk -v a="$dec" -v b="$best_dec" 'BEGIN { print (a > b ? a : b) }')
		done
		printf '%-34s %-8s %12.1f %12.2f %12.3f %12.3f  %s\n' "$1 $2 --real-dims --layers $3" "$mode" \
			"$best_pf" "$best_dec" "$(awk -v t="$best_pf" -v l="$3" 'BEGIN { print 1000 / t / l }')" \
			"$(awk -v t="$best_dec" -v l="$3" 'BEGIN { print 1000 / t / l }')" "$toks..."
		eval "pf_$mode=$best_pf; dec_$mode=$best_dec"
	done
	awk -v a="$pf_reroute" -v b="$pf_plain" -v c="$dec_reroute" -v d="$dec_plain" -v m="$1 $2" \
		'BEGIN { printf "%-34s rerouted / unrerouted: prefill %.3fx, decode %.3fx (goal >= 0.9x)\n", m, a / b, c / d }'
	"$build/sm120" report "$dir/$1.reroute.jsonl" | sed 's/^/    /'
	rm -f "$dir/$1.reroute.jsonl"
done
