import unittest

from stats import median, moving_average


class MovingAverageTest(unittest.TestCase):
    def test_pairs(self):
        self.assertEqual(moving_average([1, 2, 3, 4], 2), [1.5, 2.5, 3.5])

    def test_whole_list(self):
        self.assertEqual(moving_average([2, 4, 6], 3), [4.0])

    def test_bad_window(self):
        with self.assertRaises(ValueError):
            moving_average([1, 2], 0)


class MedianTest(unittest.TestCase):
    def test_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


if __name__ == "__main__":
    unittest.main()
