"""Reports: tables, plots and image grids that compare methods."""
