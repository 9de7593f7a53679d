sed -i 's/range(len(values) - window)/range(len(values) - window + 1)/' stats.py
