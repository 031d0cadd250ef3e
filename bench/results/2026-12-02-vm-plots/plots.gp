reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 960,560 noenhanced font "sans,10"
} else {
  set terminal png size 960,560 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-02-vm-ttft-vs-length.png"
set title "Identical resend: median TTFT vs prompt length"
set xlabel "prompt tokens"
set ylabel "TTFT (ms, log scale)"
set logscale xy
plot "/work/main/bench/results/2026-12-02-vm-plots/ttft-vs-length.dat" using 1:2 with linespoints lw 2 title "prefixd cold", \
  "/work/main/bench/results/2026-12-02-vm-plots/ttft-vs-length.dat" using 1:3 with linespoints lw 2 title "prefixd warm", \
  "/work/main/bench/results/2026-12-02-vm-plots/ttft-vs-length.dat" using 1:4 with linespoints lw 2 dt 2 title "llama-server cold", \
  "/work/main/bench/results/2026-12-02-vm-plots/ttft-vs-length.dat" using 1:5 with linespoints lw 2 dt 2 title "llama-server warm"
reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 960,560 noenhanced font "sans,10"
} else {
  set terminal png size 960,560 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-02-vm-agent-evaluated.png"
set title "Agent loop: prompt tokens evaluated per turn (mean over runs)"
set xlabel "turn"
set ylabel "tokens"
set xtics 1
set yrange [0:*]
plot "/work/main/bench/results/2026-12-02-vm-plots/agent-evaluated.dat" using 1:2 with lines lw 1 lc rgb "gray" title "prompt tokens", \
  "/work/main/bench/results/2026-12-02-vm-plots/agent-evaluated.dat" using 1:3 with linespoints lw 2 title "prefixd evaluated", \
  "/work/main/bench/results/2026-12-02-vm-plots/agent-evaluated.dat" using 1:4 with linespoints lw 2 dt 2 title "llama-server evaluated"
reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 960,760 noenhanced font "sans,10"
} else {
  set terminal png size 960,760 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-02-vm-multisession.png"
set multiplot layout 2,1 title "Multi-session chat trace (16 sessions, --parallel 2)"
set ylabel "cached / prompt tokens"
set yrange [0:1.05]
set xlabel ""
plot "/work/main/bench/results/2026-12-02-vm-plots/multisession-prefixd.dat" using 1:3 with points pt 7 ps 0.6 title "prefixd per request", \
  "/work/main/bench/results/2026-12-02-vm-plots/multisession-prefixd.dat" using 1:4 with lines lw 2 title "prefixd cumulative", \
  "/work/main/bench/results/2026-12-02-vm-plots/multisession-llama-server.dat" using 1:3 with points pt 6 ps 0.6 title "llama-server per request", \
  "/work/main/bench/results/2026-12-02-vm-plots/multisession-llama-server.dat" using 1:4 with lines lw 2 dt 2 title "llama-server cumulative"
set yrange [*:*]
set logscale y
set ylabel "TTFT (ms, log scale)"
set xlabel "seconds since the trace started (each server has its own run)"
plot "/work/main/bench/results/2026-12-02-vm-plots/multisession-prefixd.dat" using 1:2 with points pt 7 ps 0.6 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/multisession-llama-server.dat" using 1:2 with points pt 6 ps 0.6 title "llama-server"
unset multiplot
reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,2160 noenhanced font "sans,10"
} else {
  set terminal png size 1200,2160 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-02-vm-rss.png"
set multiplot layout 6,3 title "RSS (MiB) over each server's run of each workload"
set xlabel "seconds"
set ylabel "MiB"
set key bottom right
set title "resend"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-resend-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-resend-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "agent"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-agent-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-agent-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "multisession"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-multisession-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-multisession-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "shared"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-shared-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-shared-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "edit"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-edit-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-edit-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "restart"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-restart-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-restart-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "toolloop"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-toolloop-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-toolloop-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "interleave"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-interleave-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-interleave-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "gsp"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-gsp-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-gsp-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "mqa"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-mqa-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-mqa-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "multiturn"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-multiturn-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-multiturn-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "sweep-1"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-1-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-1-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "sweep-2"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-2-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-2-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "sweep-4"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-4-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-4-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "sweep-8"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-8-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-8-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "sweep-16"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-16-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-16-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
set title "sweep-32"
plot "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-32-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/rss-sweep-32-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
unset multiplot
reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 960,760 noenhanced font "sans,10"
} else {
  set terminal png size 960,760 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-02-vm-sweep.png"
set multiplot layout 2,1 title "Concurrency sweep (closed loop, as many slots as clients)"
set logscale x 2
set xlabel ""
set logscale y
set ylabel "TTFT p99 (ms, log scale)"
plot "/work/main/bench/results/2026-12-02-vm-plots/sweep.dat" using 1:2 with linespoints lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/sweep.dat" using 1:4 with linespoints lw 2 dt 2 title "llama-server"
unset logscale y
set yrange [0:*]
set ylabel "output tokens/s"
set xlabel "clients"
plot "/work/main/bench/results/2026-12-02-vm-plots/sweep.dat" using 1:3 with linespoints lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-02-vm-plots/sweep.dat" using 1:5 with linespoints lw 2 dt 2 title "llama-server"
unset multiplot
