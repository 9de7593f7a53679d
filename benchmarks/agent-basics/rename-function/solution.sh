sed -i 's/\bcalc\b/total_price/g' shop/*.py
