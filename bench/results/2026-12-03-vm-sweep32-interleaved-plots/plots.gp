reset
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1200,360 noenhanced font "sans,10"
} else {
  set terminal png size 1200,360 noenhanced
}
set datafile missing "?"
set key top left
set grid
set output "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-rss.png"
set multiplot layout 1,1 title "RSS (MiB) over each server's run of each workload"
set xlabel "seconds"
set ylabel "MiB"
set key bottom right
set title "sweep-32"
plot "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-plots/rss-sweep-32-prefixd.dat" using 1:2 with lines lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-plots/rss-sweep-32-llama-server.dat" using 1:2 with lines lw 2 dt 2 title "llama-server"
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
set output "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-sweep.png"
set multiplot layout 2,1 title "Concurrency sweep (closed loop, as many slots as clients)"
set logscale x 2
set xlabel ""
set logscale y
set ylabel "TTFT p99 (ms, log scale)"
plot "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-plots/sweep.dat" using 1:2 with linespoints lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-plots/sweep.dat" using 1:4 with linespoints lw 2 dt 2 title "llama-server"
unset logscale y
set yrange [0:*]
set ylabel "output tokens/s"
set xlabel "clients"
plot "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-plots/sweep.dat" using 1:3 with linespoints lw 2 title "prefixd", \
  "/work/main/bench/results/2026-12-03-vm-sweep32-interleaved-plots/sweep.dat" using 1:5 with linespoints lw 2 dt 2 title "llama-server"
unset multiplot
