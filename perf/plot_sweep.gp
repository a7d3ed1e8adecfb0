# Draws one all-reduce sweep of perf/sweep_algorithms.sh as a PNG with two
# panels, time vs size and busbw vs size (log axes), one line per series
# (each forced algorithm, auto, and Open MPI).
#
#   gnuplot -e "datafile='allreduce_np4.dat'; outfile='allreduce_np4.png'; nseries=6; heading='...'" \
#           perf/plot_sweep.gp
#
# The data file: a first line of names ("size", then the series twice: once
# for the time columns, once for the busbw columns), then one line per size:
# size in bytes, nseries times in us, nseries busbw in GB/s; NaN where a
# series did not run that size (an algorithm that does not apply there).

if (!exists("datafile") || !exists("outfile") || !exists("nseries")) {
  print "plot_sweep.gp: set datafile, outfile and nseries with -e (see the comment at the top)"
  exit status 2
}
if (!exists("heading")) heading = "all-reduce"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
  set terminal pngcairo size 1600,650 font ",10"
} else {
  set terminal png size 1600,650
}
set output outfile
set datafile missing "NaN"

# Size labels in powers of 1024, one tic per factor of 4.
bytes(x) = x >= 2**30 ? sprintf("%gG", x / 2.0**30) : x >= 2**20 ? sprintf("%gM", x / 2.0**20) : \
           x >= 2**10 ? sprintf("%gK", x / 2.0**10) : sprintf("%g", x)
stats datafile skip 1 using 1 nooutput
set xtics ()
do for [e = 0:40:2] {
  v = 2.0**(e + 1)
  if (v >= STATS_min && v <= STATS_max) { set xtics add (bytes(v) v) }
}
set logscale xy
set xrange [STATS_min / 1.5:STATS_max * 1.5]
set grid
set xlabel "size (bytes)"
set style data linespoints
set pointsize 0.8

# One colour per series, the same in both panels; auto and Open MPI stand out
# (auto thick red, MPI dashed black).
names = system("head -1 '" . datafile . "'")
palette = "#9400d3 #009e73 #56b4e9 #e69f00 #0072b2 #cc79a7 #8c564b #7f7f7f"
colour(k) = word(names, k + 1) eq "mpi" ? "#000000" : word(names, k + 1) eq "auto" ? "#d62728" : \
            word(palette, (k - 1) % words(palette) + 1)
dashes(k) = word(names, k + 1) eq "mpi" ? 2 : 1
width(k) = word(names, k + 1) eq "auto" ? 2.5 : 1.5

set format y "%g"
set multiplot layout 1,2 title heading
set ylabel "time per all-reduce (us)"
set key top left
plot for [k = 1:nseries] datafile using 1:(column(k + 1)) title columnheader(k + 1) \
     lc rgb colour(k) dt dashes(k) lw width(k)
set ylabel "busbw (GB/s)"
set key bottom right
plot for [k = 1:nseries] datafile using 1:(column(k + 1 + nseries)) title columnheader(k + 1 + nseries) \
     lc rgb colour(k) dt dashes(k) lw width(k)
unset multiplot
